/* `sparsetune export`, run as the command runs: what the runtime reads of
 * the export (st_db_each_winner, st_db_get_variant, st_db_get_binary) is
 * what it reads of the source; the export holds nothing else; --device and
 * --op filter; the source stays byte for byte as it was; bad input is
 * refused with nothing created; an existing --out is kept unless --force;
 * and the commands that write refuse an export while show and regress read
 * it. (test_export_killed: the export killed on the way.) */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "export_fixture.h"
#include "st_db_export.h"
#include "test_db_fixture.h"

static uint64_t g_seed;

enum { CUBIN_BYTES = 32 * 1024 };

typedef struct device_model {
  const char *name, *arch;
} device_model;

static const device_model MODELS[] = {{EF_H200, "sm_90a"}, {EF_A100, "sm_80"}};

/* ---- reading both files as the runtime does -------------------------------- */

typedef struct winner_list {
  st_winner_row *w;
  int n, cap;
} winner_list;

static int collect(void *ctx, const st_winner_row *w) {
  winner_list *l = ctx;
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 8;
    l->w = realloc(l->w, sizeof *l->w * (size_t)l->cap);
    assert_non_null(l->w);
  }
  l->w[l->n++] = *w;
  return 0;
}

static int op_listed(const char *ops, const char *op) {
  if (!ops) return 1;
  char padded[256], needle[64];
  snprintf(padded, sizeof padded, ",%s,", ops);
  snprintf(needle, sizeof needle, ",%s,", op);
  return strstr(padded, needle) != NULL;
}

/* The winners of a model (arch NULL: any), those of `ops` only. */
static winner_list read_winners(st_db *db, const char *device, const char *arch, const char *ops) {
  winner_list all = {0}, kept = {0};
  st_err err = {{0}};
  if (st_db_each_winner(db, device, arch, collect, &all, &err) != ST_OK) fail_msg("each_winner: %s", err.msg);
  for (int i = 0; i < all.n; i++)
    if (op_listed(ops, all.w[i].op)) collect(&kept, &all.w[i]);
  free(all.w);
  return kept;
}

static void assert_same_params(const st_params *a, const st_params *b) {
  assert_int_equal(a->n, b->n);
  for (int i = 0; i < a->n; i++) {
    assert_string_equal(a->p[i].key, b->p[i].key);
    assert_string_equal(a->p[i].val, b->p[i].val);
  }
}

static void assert_same_winner(const st_winner_row *a, const st_winner_row *b) {
  assert_int_equal(a->device_id, b->device_id);
  assert_string_equal(a->op, b->op);
  assert_string_equal(a->dispatch_key, b->dispatch_key);
  assert_same_params(&a->dispatch, &b->dispatch);
  assert_string_equal(a->variant_id, b->variant_id);
  assert_string_equal(a->variant_name, b->variant_name);
  assert_int_equal(a->run_id, b->run_id);
  assert_true(a->median_us == b->median_us);
  assert_true(a->regret == b->regret);
  assert_string_equal(a->default_variant_id, b->default_variant_id);
  assert_true(a->default_us == b->default_us);
}

static void assert_same_variant(st_db *src, st_db *dst, const char *id) {
  st_variant_row a, b;
  st_err err = {{0}};
  if (st_db_get_variant(src, id, &a, &err) != ST_OK) fail_msg("source: %s", err.msg);
  if (st_db_get_variant(dst, id, &b, &err) != ST_OK) fail_msg("export: %s", err.msg);
  assert_string_equal(a.id, b.id);
  assert_string_equal(a.op, b.op);
  assert_string_equal(a.name, b.name);
  assert_string_equal(a.source_hash, b.source_hash);
  assert_same_params(&a.kernel, &b.kernel);
  assert_same_params(&a.launch, &b.launch);
  assert_int_equal(a.is_default, b.is_default);
}

/* The binary the runtime loads for (hash, arch): the same row, byte for
 * byte, where the source has a usable one; none where its compile failed.
 * Returns whether the source had a usable one. */
static int assert_same_binary(st_db *src, st_db *dst, const char *hash, const char *arch) {
  st_binary_row a, b;
  int fa = 0, fb = 0;
  st_err err = {{0}};
  assert_int_equal(st_db_get_binary(src, hash, arch, NULL, &a, &fa, &err), ST_OK);
  assert_int_equal(st_db_get_binary(dst, hash, arch, NULL, &b, &fb, &err), ST_OK);
  assert_true(fa);
  const int usable = a.ok && a.cubin_size > 0;
  if (!usable) {
    assert_false(fb);
  } else {
    assert_true(fb);
    assert_string_equal(a.compiler, b.compiler);
    assert_int_equal(b.ok, 1);
    assert_int_equal(a.cubin_size, b.cubin_size);
    assert_memory_equal(a.cubin, b.cubin, a.cubin_size);
    assert_int_equal(a.registers, b.registers);
    assert_int_equal(a.spill_bytes, b.spill_bytes);
    assert_int_equal(a.shared_bytes, b.shared_bytes);
    assert_int_equal(a.local_bytes, b.local_bytes);
    assert_true(a.compile_ms == b.compile_ms);
    assert_string_equal(a.log, b.log);
  }
  st_db_binary_free(&a);
  st_db_binary_free(&b);
  return usable;
}

/* Everything the runtime reads for `device` (on `arch`, or any arch) is
 * the same in both files, for the ops of `ops`; returns the winners seen. */
static int assert_reads_back(st_db *src, st_db *dst, const device_model *m, const char *arch, const char *ops) {
  winner_list a = read_winners(src, m->name, arch, ops), b = read_winners(dst, m->name, arch, NULL);
  assert_int_equal(a.n, b.n);
  for (int i = 0; i < a.n && i < b.n; i++) {
    assert_same_winner(&a.w[i], &b.w[i]);
    assert_same_variant(src, dst, a.w[i].variant_id);
    if (a.w[i].default_variant_id[0]) assert_same_variant(src, dst, a.w[i].default_variant_id);
    st_variant_row v;
    st_err err = {{0}};
    assert_int_equal(st_db_get_variant(dst, a.w[i].variant_id, &v, &err), ST_OK);
    assert_same_binary(src, dst, v.source_hash, m->arch);
    if (a.w[i].run_id) {
      st_run_row ra, rb;
      int fa = 0, fb = 0;
      assert_int_equal(st_db_get_run(src, a.w[i].run_id, &ra, &fa, &err), ST_OK);
      assert_int_equal(st_db_get_run(dst, a.w[i].run_id, &rb, &fb, &err), ST_OK);
      assert_true(fa && fb);
      assert_memory_equal(&ra, &rb, sizeof ra);
    }
  }
  const int n = a.n;
  free(a.w);
  free(b.w);
  return n;
}

static st_db *open_ro(const char *path) {
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open_readonly(path, &db, &err) != ST_OK) fail_msg("%s", err.msg);
  return db;
}

/* Runs the export of f->src into f->out with up to four more arguments
 * (the first NULL ends them); exit 0. Its output to *summary (malloc'ed)
 * when summary is not NULL. */
static void export_ok(const ef_fixture *f, char **summary, const char *a1, const char *a2, const char *a3,
                      const char *a4) {
  char *discarded = NULL;
  char **out = summary ? summary : &discarded;
  const int rc = EF_RUN(out, "export", "--db", f->src, "--out", f->out, a1, a2, a3, a4);
  if (rc != 0) fail_msg("export exited %d: %s", rc, *out);
  free(discarded);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_export_reads_back_as_its_source(void **state) {
  (void)state;
  ef_fixture f;
  ef_build(&f, CUBIN_BYTES, g_seed);
  export_ok(&f, NULL, NULL, NULL, NULL, NULL);
  st_db *src = open_ro(f.src), *dst = open_ro(f.out);
  int seen = 0, usable = 0, failed = 0;
  for (size_t m = 0; m < sizeof MODELS / sizeof MODELS[0]; m++) {
    seen += assert_reads_back(src, dst, &MODELS[m], MODELS[m].arch, NULL);
    assert_reads_back(src, dst, &MODELS[m], NULL, NULL); /* any arch: the same rows */
    winner_list w = read_winners(src, MODELS[m].name, MODELS[m].arch, NULL);
    for (int i = 0; i < w.n; i++) {
      st_variant_row v;
      st_err err = {{0}};
      assert_int_equal(st_db_get_variant(src, w.w[i].variant_id, &v, &err), ST_OK);
      if (assert_same_binary(src, dst, v.source_hash, MODELS[m].arch))
        usable++;
      else
        failed++;
    }
    free(w.w);
  }
  /* Both cases were met: winners with a cubin, and one whose compile failed. */
  assert_int_equal(seen, EF_WINNERS);
  assert_int_equal(usable, EF_BINARIES);
  assert_int_equal(failed, 1);
  st_db_close(src);
  st_db_close(dst);
  ef_destroy(&f);
}

static void test_export_holds_only_what_the_runtime_reads(void **state) {
  (void)state;
  ef_fixture f;
  ef_build(&f, CUBIN_BYTES, g_seed);
  char *summary = NULL;
  export_ok(&f, &summary, NULL, NULL, NULL, NULL);
  assert_non_null(strstr(summary, "exported 6 winners, 6 variants, 5 binaries"));
  free(summary);
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM measurements"), 0);
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM shapes"), 0);
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM sources WHERE text <> ''"), 0);
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM sources"), 6);
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM binaries WHERE ok = 0 OR cubin IS NULL"), 0);
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM winners"), EF_WINNERS);
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM devices"), 3);
  /* The bench run no winner refers to stays behind. */
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM runs"), 3);
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM runs WHERE kind = 'bench'"), 0);
  /* No superseded winner's variant, unnamed default or unused variant. */
  char *v = ef_sql_text(f.out, "SELECT group_concat(id, ' ') FROM (SELECT id FROM variants ORDER BY id)");
  assert_string_equal(v, "id_attn_a id_attn_def id_dec_a id_dec_b id_dec_def id_topk_a");
  free(v);
  /* Only the winners' cubins on their devices' arch, the newest compiler's;
   * none of the defaults, of unused variants, or of other archs. */
  char *b = ef_sql_text(f.out, "SELECT group_concat(b, ' ') FROM (SELECT source_hash || '/' || arch || '/' || "
                               "compiler AS b FROM binaries ORDER BY b)");
  assert_string_equal(b, "src_attn_a/sm_80/13.0 src_attn_a/sm_90a/13.0 src_dec_a/sm_80/13.0 src_dec_a/sm_90a/13.0 "
                         "src_dec_b/sm_90a/13.0");
  free(b);
  /* One whole, self-contained file of this schema. */
  char *check = ef_sql_text(f.out, "PRAGMA integrity_check");
  assert_string_equal(check, "ok");
  free(check);
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM pragma_foreign_key_check"), 0);
  char *mode = ef_sql_text(f.out, "PRAGMA journal_mode");
  assert_string_equal(mode, "delete");
  free(mode);
  assert_int_equal(ef_sql_int(f.out, "PRAGMA user_version"), ST_DB_SCHEMA_VERSION);
  assert_int_equal(ef_sql_int(f.out, "PRAGMA application_id"), ST_DB_APPLICATION_ID);
  char *strays = ef_strays(&f);
  assert_string_equal(strays, "");
  free(strays);
  ef_destroy(&f);
}

static void test_export_is_marked_with_its_source(void **state) {
  (void)state;
  ef_fixture f;
  ef_build(&f, CUBIN_BYTES, g_seed);
  export_ok(&f, NULL, "--device", EF_H200, "--op", "index_decode,sparse_attn_decode");
  char real_src[PATH_MAX];
  assert_non_null(realpath(f.src, real_src));
  st_db *dst = open_ro(f.out);
  st_db_export_mark m;
  st_err err = {{0}};
  assert_int_equal(st_db_get_export_mark(dst, &m, &err), ST_OK);
  assert_true(m.exported);
  assert_string_equal(m.from, real_src);
  assert_int_equal(strlen(m.at), 24); /* 2026-01-31T12:00:00.000Z */
  assert_int_equal(m.at[23], 'Z');
  assert_string_equal(m.filter, "device=" EF_H200 " op=index_decode,sparse_attn_decode");
  assert_int_equal(m.winners, 3);
  assert_int_equal(m.variants, 5);
  assert_int_equal(m.binaries, 3);
  st_db_close(dst);
  /* The source is not marked. */
  st_db *src = open_ro(f.src);
  assert_int_equal(st_db_get_export_mark(src, &m, &err), ST_OK);
  assert_false(m.exported);
  assert_int_equal(st_db_refuse_exported(src, &err), ST_OK);
  st_db_close(src);
  ef_destroy(&f);
}

static void test_export_filters_by_device_and_op(void **state) {
  (void)state;
  ef_fixture f;
  ef_build(&f, CUBIN_BYTES, g_seed);
  static const struct {
    const char *device, *ops;
    long long winners, variants, binaries;
  } cases[] = {
      {EF_H200, NULL, 3, 5, 3},
      {NULL, "index_decode,index_topk", 4, 4, 3},
      {EF_A100, "sparse_attn_decode", 1, 2, 1},
      {EF_A100, "index_topk", 1, 1, 0}, /* its only compile failed: the runtime falls back */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char *summary = NULL;
    const int rc = EF_RUN(&summary, "export", "--db", f.src, "--out", f.out, "--force",
                          cases[c].device ? "--device" : "--op", cases[c].device ? cases[c].device : cases[c].ops,
                          cases[c].device && cases[c].ops ? "--op" : NULL, cases[c].ops);
    if (rc != 0) fail_msg("case %zu: exit %d: %s", c, rc, summary);
    char want[128];
    snprintf(want, sizeof want, "exported %lld winners, %lld variants, %lld binaries", cases[c].winners,
             cases[c].variants, cases[c].binaries);
    if (!strstr(summary, want)) fail_msg("case %zu: '%s' lacks '%s'", c, summary, want);
    free(summary);
    st_db *src = open_ro(f.src), *dst = open_ro(f.out);
    for (size_t m = 0; m < sizeof MODELS / sizeof MODELS[0]; m++) {
      const int chosen = !cases[c].device || !strcmp(cases[c].device, MODELS[m].name);
      if (chosen) {
        assert_reads_back(src, dst, &MODELS[m], MODELS[m].arch, cases[c].ops);
      } else {
        winner_list none = read_winners(dst, MODELS[m].name, NULL, NULL);
        assert_int_equal(none.n, 0);
        free(none.w);
      }
    }
    st_db_close(src);
    st_db_close(dst);
    assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM winners"), cases[c].winners);
  }
  ef_destroy(&f);
}

/* A left-out (op, dispatch key) loses its winners, on every device model,
 * and nothing else; the mark says which. */
static void test_export_leaves_out_one_dispatch_key(void **state) {
  (void)state;
  ef_fixture f;
  ef_build(&f, CUBIN_BYTES, g_seed);
  export_ok(&f, NULL, NULL, NULL, NULL, NULL);
  const long long all = ef_sql_int(f.out, "SELECT count(*) FROM winners");
  char *op = ef_sql_text(f.out, "SELECT op FROM winners ORDER BY rowid LIMIT 1");
  char *key = ef_sql_text(f.out, "SELECT dispatch_key FROM winners ORDER BY rowid LIMIT 1");
  char sql[768];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM winners WHERE op = '%s' AND dispatch_key = '%s'", op, key);
  const long long of_key = ef_sql_int(f.out, sql);
  assert_true(of_key >= 1 && of_key < all);
  char path[400];
  snprintf(path, sizeof path, "%s/without.db", f.dir);
  st_db *src = open_ro(f.src);
  const st_db_export_filter filter = {.leave_out_op = op, .leave_out_key = key};
  st_db_export_counts counts = {0};
  st_err err = {{0}};
  if (st_db_export(src, path, &filter, f.src, NULL, &counts, &err) != ST_OK) fail_msg("%s", err.msg);
  st_db_close(src);
  assert_int_equal(counts.winners, all - of_key);
  assert_int_equal(ef_sql_int(path, "SELECT count(*) FROM winners"), all - of_key);
  assert_int_equal(ef_sql_int(path, sql), 0);
  char *mark = ef_sql_text(path, "SELECT value FROM meta WHERE key = 'exported_filter'");
  char want[700];
  snprintf(want, sizeof want, "without=%s:%s", op, key);
  assert_string_equal(mark, want);
  free(mark);
  free(op);
  free(key);
  ef_destroy(&f);
}

static long long file_size(const char *path) {
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  return (long long)sb.st_size;
}

/* "... to DST: N bytes (...), from SRC of M bytes (...)" */
static void parse_summary(const char *summary, const char *out_path, long long *dst_bytes, long long *src_bytes) {
  const char *to = strstr(summary, out_path);
  const char *from = to ? strstr(to, ", from ") : NULL;
  if (!to || !from) {
    fail_msg("summary '%s' names no sizes", summary);
    return;
  }
  assert_int_equal(sscanf(to + strlen(out_path), ": %lld bytes", dst_bytes), 1);
  from = strstr(from, " of ");
  assert_non_null(from);
  assert_int_equal(sscanf(from, " of %lld bytes", src_bytes), 1);
}

static void test_export_is_smaller_and_leaves_its_source_untouched(void **state) {
  (void)state;
  ef_fixture f;
  ef_build(&f, CUBIN_BYTES, g_seed);
  const uint64_t before = ef_hash_file(f.src);
  struct stat sb_before, sb_after;
  assert_int_equal(stat(f.src, &sb_before), 0);
  char *summary = NULL;
  export_ok(&f, &summary, NULL, NULL, NULL, NULL);
  /* The summary's sizes are the files'. */
  long long dst_bytes = -1, src_bytes = -1;
  parse_summary(summary, f.out, &dst_bytes, &src_bytes);
  free(summary);
  assert_int_equal(dst_bytes, file_size(f.out));
  assert_int_equal(src_bytes, file_size(f.src));
  /* Sources (~900 KB) and 14 of 19 cubins stay behind. */
  assert_true(dst_bytes * 4 < src_bytes);
  export_ok(&f, NULL, "--force", "--device", EF_A100, NULL);
  export_ok(&f, NULL, "--force", "--op", "index_decode", NULL);
  assert_int_equal(ef_hash_file(f.src), before);
  assert_int_equal(stat(f.src, &sb_after), 0);
  assert_int_equal(sb_after.st_size, sb_before.st_size);
  assert_true(sb_after.st_mtim.tv_sec == sb_before.st_mtim.tv_sec &&
              sb_after.st_mtim.tv_nsec == sb_before.st_mtim.tv_nsec);
  char *strays = ef_strays(&f); /* no -wal, -shm, -journal or -lock beside it */
  assert_string_equal(strays, "");
  free(strays);
  ef_destroy(&f);
}

static void write_text(const char *path, const char *text) { fx_write_file(path, text, strlen(text)); }

static void test_export_refuses_bad_input_and_creates_nothing(void **state) {
  (void)state;
  ef_fixture f;
  ef_build(&f, CUBIN_BYTES, g_seed);
  char missing[400], corrupt[400], foreign[400], text[400], empty[400], no_folder[400], other_spelling[400];
  snprintf(missing, sizeof missing, "%s/missing.db", f.dir);
  snprintf(corrupt, sizeof corrupt, "%s/corrupt.db", f.dir);
  snprintf(foreign, sizeof foreign, "%s/foreign.db", f.dir);
  snprintf(text, sizeof text, "%s/notes.txt", f.dir);
  snprintf(empty, sizeof empty, "%s/empty.db", f.dir);
  snprintf(no_folder, sizeof no_folder, "%s/no/such/folder/out.db", f.dir);
  snprintf(other_spelling, sizeof other_spelling, "%s/./src.db", f.dir);
  size_t n = 0;
  unsigned char *bytes = fx_read_file(f.src, &n);
  fx_write_file(corrupt, bytes, n / 2); /* a truncated copy */
  free(bytes);
  sqlite3 *c = NULL;
  assert_int_equal(sqlite3_open(foreign, &c), SQLITE_OK);
  assert_int_equal(sqlite3_exec(c, "CREATE TABLE notes (x); INSERT INTO notes VALUES (1)", NULL, NULL, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
  write_text(text, "not a database, just text\n");
  write_text(empty, "");
  const uint64_t src_hash = ef_hash_file(f.src), corrupt_hash = ef_hash_file(corrupt),
                 foreign_hash = ef_hash_file(foreign);
  const struct {
    int rc;
    const char *message;
    const char *args[10];
  } cases[] = {
      {2, "--db SRC is required", {"export", "--out", f.out}},
      {2, "--out DST is required", {"export", "--db", f.src}},
      {2, "--out needs a file name", {"export", "--db", f.src, "--out", ""}},
      {2, "needs a value", {"export", "--db", f.src, "--out"}},
      {2, "is the file --db names", {"export", "--db", f.src, "--out", f.src}},
      {2, "is the file --db names", {"export", "--db", f.src, "--out", other_spelling}},
      {2, "unknown op 'bogus' (known: index_decode,", {"export", "--db", f.src, "--out", f.out, "--op", "bogus"}},
      {2, "unknown op ''", {"export", "--db", f.src, "--out", f.out, "--op", "index_decode,"}},
      {2, "unknown op 'index_decod'", {"export", "--db", f.src, "--out", f.out, "--op", "index_decod"}},
      {2, "--device needs a device model's name", {"export", "--db", f.src, "--out", f.out, "--device", ""}},
      {2, "has no winners of device NVIDIA H100", {"export", "--db", f.src, "--out", f.out, "--device", "NVIDIA H100"}},
      {2, "unexpected argument 'extra'", {"export", "--db", f.src, "--out", f.out, "extra"}},
      {2, "option --json does not apply", {"export", "--db", f.src, "--out", f.out, "--json"}},
      {2, "unknown option --bogus", {"export", "--db", f.src, "--out", f.out, "--bogus"}},
      {2, "cannot be read", {"export", "--db", missing, "--out", f.out}},
      {1, "corrupt", {"export", "--db", corrupt, "--out", f.out}},
      {1, "another application", {"export", "--db", foreign, "--out", f.out}},
      {1, "is not an SQLite database", {"export", "--db", text, "--out", f.out}},
      {1, "is empty", {"export", "--db", empty, "--out", f.out}},
      {1, "cannot create", {"export", "--db", f.src, "--out", no_folder}},
      {2, "exists and is not a file", {"export", "--db", f.src, "--out", f.dir, "--force"}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *out = NULL;
    const int rc = ef_run(&out, cases[i].args);
    if (rc != cases[i].rc || !strstr(out, cases[i].message))
      fail_msg("case %zu (%s): exit %d (want %d), output '%s' (want '%s')", i, cases[i].args[1], rc, cases[i].rc, out,
               cases[i].message);
    free(out);
    assert_false(ef_exists(f.out));
    assert_false(ef_exists(missing));
    char *strays = ef_strays(&f);
    if (strays[0]) fail_msg("case %zu left %s", i, strays);
    free(strays);
  }
  char no_such[400];
  snprintf(no_such, sizeof no_such, "%s/no", f.dir);
  assert_false(ef_exists(no_such));
  assert_int_equal(ef_hash_file(f.src), src_hash);
  assert_int_equal(ef_hash_file(corrupt), corrupt_hash);
  assert_int_equal(ef_hash_file(foreign), foreign_hash);
  ef_destroy(&f);
}

static void test_existing_out_is_kept_unless_force(void **state) {
  (void)state;
  ef_fixture f;
  ef_build(&f, CUBIN_BYTES, g_seed);
  write_text(f.out, "an engine's file\n");
  const uint64_t kept = ef_hash_file(f.out);
  char *out = NULL;
  assert_int_equal(EF_RUN(&out, "export", "--db", f.src, "--out", f.out), 2);
  assert_non_null(strstr(out, "exists; it is kept (--force replaces it)"));
  free(out);
  assert_int_equal(ef_hash_file(f.out), kept);
  export_ok(&f, NULL, "--force", NULL, NULL, NULL);
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM winners"), EF_WINNERS);
  /* An export is kept as any file is. */
  const uint64_t exported = ef_hash_file(f.out);
  assert_int_equal(EF_RUN(NULL, "export", "--db", f.src, "--out", f.out, "--device", EF_H200), 2);
  assert_int_equal(ef_hash_file(f.out), exported);
  export_ok(&f, NULL, "--force", "--device", EF_H200, NULL);
  assert_int_equal(ef_sql_int(f.out, "SELECT count(*) FROM winners"), 3);
  char *strays = ef_strays(&f);
  assert_string_equal(strays, "");
  free(strays);
  ef_destroy(&f);
}

static void assert_refused(const char *const *args, const char *expected) {
  char *out = NULL;
  const int rc = ef_run(&out, args);
  if (rc != 1 || !strstr(out, expected))
    fail_msg("sparsetune %s: exit %d (want 1), output '%s' (want '%s')", args[0], rc, out, expected);
  free(out);
}

static void test_writing_commands_refuse_an_export(void **state) {
  (void)state;
  ef_fixture f;
  ef_build(&f, CUBIN_BYTES, g_seed);
  export_ok(&f, NULL, NULL, NULL, NULL, NULL);
  char real_src[PATH_MAX], expected[PATH_MAX + 300];
  assert_non_null(realpath(f.src, real_src));
  snprintf(expected, sizeof expected,
           "'%s' is an exported runtime database (from %s); tune into the source database and export again", f.out,
           real_src);
  const uint64_t before = ef_hash_file(f.out);
  assert_refused((const char *const[]){"generate", "--suite", "smoke", "--op", "index_topk", "--db", f.out, NULL},
                 expected);
  assert_refused((const char *const[]){"compile", "--suite", "smoke", "--op", "index_topk", "--arch", "sm_90a", "--db",
                                       f.out, NULL},
                 expected);
  assert_refused((const char *const[]){"tune", "--suite", "smoke", "--op", "index_topk", "--db", f.out, NULL},
                 expected);
  /* bench times an export and records nothing: it is not refused as one
   * (here it may still fail for want of a GPU, or of real binaries), and
   * --harness, which loads modules as tune does, asks for the source. */
  char *bench_out = NULL;
  const int bench_rc = EF_RUN(&bench_out, "bench", "--suite", "smoke", "--op", "index_topk", "--db", f.out);
  if (strstr(bench_out, "is an exported runtime database"))
    fail_msg("bench refused the export (exit %d): %s", bench_rc, bench_out);
  free(bench_out);
  assert_int_equal(EF_RUN(&bench_out, "bench", "--suite", "smoke", "--op", "index_topk", "--harness", "--db", f.out),
                   2);
  assert_non_null(strstr(bench_out, "--harness needs the tuned database, not an export"));
  free(bench_out);
  /* The database module refuses it to any writer. */
  st_db *db = NULL;
  st_err err = {{0}};
  assert_int_equal(st_db_open(f.out, ST_DB_READWRITE, &db, &err), ST_ERR_DB);
  assert_null(db);
  assert_non_null(strstr(err.msg, expected));
  assert_int_equal(ef_hash_file(f.out), before);
  char *strays = ef_strays(&f);
  assert_string_equal(strays, "");
  free(strays);
  /* Readers read it. */
  char *out = NULL;
  assert_int_equal(EF_RUN(&out, "show", "runs", "--db", f.out), 0);
  assert_null(strstr(out, "exported"));
  free(out);
  assert_int_equal(EF_RUN(&out, "show", "winners", EF_H200, "--db", f.out), 0);
  assert_non_null(strstr(out, "dec_a.t128"));
  assert_non_null(strstr(out, "attn_a.t128"));
  free(out);
  assert_int_equal(EF_RUN(&out, "regress", "--base", "1", "--head", "2", "--db", f.out), 0);
  assert_null(strstr(out, "exported"));
  free(out);
  assert_int_equal(ef_hash_file(f.out), before);
  ef_destroy(&f);
}

int main(void) {
  g_seed = st_test_seed("test_export");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_export_reads_back_as_its_source),
      cmocka_unit_test(test_export_holds_only_what_the_runtime_reads),
      cmocka_unit_test(test_export_is_marked_with_its_source),
      cmocka_unit_test(test_export_filters_by_device_and_op),
      cmocka_unit_test(test_export_leaves_out_one_dispatch_key),
      cmocka_unit_test(test_export_is_smaller_and_leaves_its_source_untouched),
      cmocka_unit_test(test_export_refuses_bad_input_and_creates_nothing),
      cmocka_unit_test(test_existing_out_is_kept_unless_force),
      cmocka_unit_test(test_writing_commands_refuse_an_export),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
