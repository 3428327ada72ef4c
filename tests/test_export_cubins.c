/* Cubins in an export are stored zlib-compressed ("STZ1", the size as 8
 * bytes little-endian, the zlib stream: db/cubin_blob.h) and read back
 * byte for byte: `sparsetune export` of cubin-like images of a few hundred
 * KB makes a file smaller than their bytes, and st_db_get_binary on it
 * (and on an export of the export) gives each image back; a compressed
 * blob that is cut short, damaged, of another format or whose size lies
 * is refused with ST_ERR_DB naming the binary, and no cubin; a tuned
 * database keeps its cubins as compiled. The blobs are made and checked
 * here with zlib directly, from the format alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#include "export_fixture.h"
#include "test_db_fixture.h"

static uint64_t g_seed;

enum { WINNERS = 6, MIN_CUBIN = 200 * 1024, MAX_CUBIN = 420 * 1024, HEADER = 12 };

#define ARCH "sm_90a"

/* ---- cubin-like images ------------------------------------------------------ */

/* `n` bytes that compress as a cubin does: the ELF magic, then mostly
 * 16-byte instruction words from a small set with random register fields,
 * runs of zeros (alignment, tables) and random constants. malloc'ed. */
static unsigned char *fake_cubin(size_t n, uint64_t *rng) {
  enum { OPCODES = 48, WORD = 16 };
  unsigned char op[OPCODES][WORD];
  for (int k = 0; k < OPCODES; k++)
    for (int b = 0; b < WORD; b++) op[k][b] = (unsigned char)st_rand_next(rng);
  unsigned char *c = malloc(n);
  assert_non_null(c);
  static const unsigned char elf[4] = {0x7f, 'E', 'L', 'F'};
  memcpy(c, elf, sizeof elf);
  size_t i = 4;
  while (i < n) {
    const uint64_t r = st_rand_next(rng);
    unsigned char w[64];
    size_t len = WORD;
    if (r % 16 == 0) {
      len = 16 + (size_t)(r >> 8) % 48;
      memset(w, 0, len);
    } else if (r % 16 == 1) {
      len = 4 + (size_t)(r >> 8) % 12;
      for (size_t b = 0; b < len; b++) w[b] = (unsigned char)st_rand_next(rng);
    } else {
      memcpy(w, op[(r >> 8) % OPCODES], WORD);
      w[2] = (unsigned char)(r >> 16); /* registers */
      w[3] = (unsigned char)((r >> 24) & 0x3f);
    }
    if (len > n - i) len = n - i;
    memcpy(c + i, w, len);
    i += len;
  }
  return c;
}

/* "STZ1" + size + zlib stream of `cubin`, made here from the format. */
static unsigned char *pack(const unsigned char *cubin, size_t n, size_t *packed_n) {
  uLongf z = compressBound((uLong)n);
  unsigned char *p = malloc(HEADER + z);
  assert_non_null(p);
  static const char magic[4] = {'S', 'T', 'Z', '1'};
  memcpy(p, magic, sizeof magic);
  for (int k = 0; k < 8; k++) p[4 + k] = (unsigned char)((uint64_t)n >> (8 * k));
  assert_int_equal(compress2(p + HEADER, &z, cubin, (uLong)n, 6), Z_OK);
  *packed_n = HEADER + z;
  return p;
}

/* ---- a tuned database ------------------------------------------------------- */

typedef struct tuned {
  ef_fixture f; /* the folder, f.src and f.out */
  unsigned char *cubin[WINNERS];
  size_t size[WINNERS];
  size_t total;
} tuned;

static void hash_of(int i, char *buf, size_t cap) { snprintf(buf, cap, "src_v%d", i); }

static void put_cubin(st_db *db, const char *hash, const void *cubin, size_t n) {
  st_binary_row b;
  memset(&b, 0, sizeof b);
  snprintf(b.source_hash, sizeof b.source_hash, "%s", hash);
  snprintf(b.arch, sizeof b.arch, ARCH);
  snprintf(b.compiler, sizeof b.compiler, "13.0");
  b.ok = 1;
  b.cubin = (void *)(uintptr_t)cubin;
  b.cubin_size = n;
  b.registers = 128;
  b.compile_ms = 950.0;
  st_err err = {{0}};
  if (st_db_put_binary(db, &b, &err) != ST_OK) fail_msg("binary %s: %s", hash, err.msg);
}

/* WINNERS winners on an H200, each naming a variant whose cubin is a
 * cubin-like image of MIN_CUBIN..MAX_CUBIN bytes. */
static void build(tuned *t) {
  memset(t, 0, sizeof *t);
  const char *tmp = getenv("TMPDIR");
  snprintf(t->f.dir, sizeof t->f.dir, "%s/st_cubins_XXXXXX", tmp && *tmp ? tmp : "/tmp");
  assert_non_null(mkdtemp(t->f.dir));
  snprintf(t->f.src, sizeof t->f.src, "%s/src.db", t->f.dir);
  snprintf(t->f.out, sizeof t->f.out, "%s/out.db", t->f.dir);
  uint64_t rng = g_seed;
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open(t->f.src, ST_DB_READWRITE, &db, &err) != ST_OK) fail_msg("%s", err.msg);
  const int64_t dev = fx_device(db, EF_H200, ARCH, "GPU-aaaa");
  for (int i = 0; i < WINNERS; i++) {
    char name[16], id[40];
    snprintf(name, sizeof name, "v%d", i);
    fx_variant(db, "index_decode", name, 0, id);
    t->size[i] = (size_t)st_rand_int(&rng, MIN_CUBIN, MAX_CUBIN);
    t->cubin[i] = fake_cubin(t->size[i], &rng);
    t->total += t->size[i];
    char hash[40];
    hash_of(i, hash, sizeof hash);
    put_cubin(db, hash, t->cubin[i], t->size[i]);
    st_winner_row w;
    memset(&w, 0, sizeof w);
    w.device_id = dev;
    snprintf(w.op, sizeof w.op, "index_decode");
    snprintf(w.dispatch_key, sizeof w.dispatch_key, "B=%d,dtype=bf16", 1 << i);
    assert_int_equal(st_params_set_int(&w.dispatch, "B", 1 << i, &err), ST_OK);
    snprintf(w.variant_id, sizeof w.variant_id, "%s", id);
    w.median_us = 10.0 + i;
    if (st_db_put_winner(db, &w, &err) != ST_OK) fail_msg("winner %d: %s", i, err.msg);
  }
  st_db_close(db);
}

static void destroy(tuned *t) {
  for (int i = 0; i < WINNERS; i++) free(t->cubin[i]);
  ef_destroy(&t->f);
}

static long long file_size(const char *path) {
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  return (long long)sb.st_size;
}

static void export_ok(const char *src, const char *out) {
  char *summary = NULL;
  const int rc = EF_RUN(&summary, "export", "--db", src, "--out", out);
  if (rc != 0) fail_msg("export exited %d: %s", rc, summary);
  char want[64];
  snprintf(want, sizeof want, "%d binaries (cubins of ", WINNERS);
  if (!strstr(summary, want) || !strstr(summary, ", stored compressed in "))
    fail_msg("summary '%s' does not give the cubins' sizes", summary);
  free(summary);
}

/* Every winner's cubin read from `path` as the runtime reads it: the image. */
static void assert_cubins_read_back(const tuned *t, const char *path) {
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open_readonly(path, &db, &err) != ST_OK) fail_msg("%s", err.msg);
  for (int i = 0; i < WINNERS; i++) {
    char hash[40];
    hash_of(i, hash, sizeof hash);
    st_binary_row b;
    int found = 0;
    if (st_db_get_binary(db, hash, ARCH, NULL, &b, &found, &err) != ST_OK) fail_msg("%s: %s", hash, err.msg);
    assert_true(found);
    assert_int_equal(b.ok, 1);
    assert_int_equal(b.cubin_size, t->size[i]);
    assert_memory_equal(b.cubin, t->cubin[i], t->size[i]);
    assert_int_equal(b.registers, 128);
    st_db_binary_free(&b);
  }
  st_db_close(db);
}

/* A stored blob through a plain connection; malloc'ed. */
static unsigned char *stored_blob(const char *path, const char *hash, size_t *n) {
  sqlite3 *c = NULL;
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(c, "SELECT cubin FROM binaries WHERE source_hash = ?1", -1, &s, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_bind_text(s, 1, hash, -1, SQLITE_STATIC), SQLITE_OK);
  assert_int_equal(sqlite3_step(s), SQLITE_ROW);
  *n = (size_t)sqlite3_column_bytes(s, 0);
  unsigned char *b = malloc(*n + 1);
  assert_non_null(b);
  if (*n) memcpy(b, sqlite3_column_blob(s, 0), *n);
  sqlite3_finalize(s);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
  return b;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_export_stores_cubins_compressed_and_reads_them_back(void **state) {
  (void)state;
  tuned t;
  build(&t);
  export_ok(t.f.src, t.f.out);
  assert_cubins_read_back(&t, t.f.out);
  /* Stored in the format, which zlib alone reads back. */
  size_t stored = 0;
  for (int i = 0; i < WINNERS; i++) {
    char hash[40];
    hash_of(i, hash, sizeof hash);
    size_t n = 0;
    unsigned char *blob = stored_blob(t.f.out, hash, &n);
    assert_true(n > HEADER);
    assert_memory_equal(blob, "STZ1", 4);
    uint64_t recorded = 0;
    for (int k = 0; k < 8; k++) recorded |= (uint64_t)blob[4 + k] << (8 * k);
    assert_int_equal(recorded, t.size[i]);
    unsigned char *inflated = malloc(t.size[i]);
    assert_non_null(inflated);
    uLongf got = (uLongf)t.size[i];
    assert_int_equal(uncompress(inflated, &got, blob + HEADER, (uLong)(n - HEADER)), Z_OK);
    assert_int_equal(got, t.size[i]);
    assert_memory_equal(inflated, t.cubin[i], t.size[i]);
    free(inflated);
    free(blob);
    stored += n;
  }
  const long long out_bytes = file_size(t.f.out);
  printf("# %d cubins: %zu bytes as compiled, %zu stored in the export (%.1f%%); export %lld bytes, source %lld\n",
         WINNERS, t.total, stored, 100.0 * (double)stored / (double)t.total, out_bytes, file_size(t.f.src));
  assert_true(out_bytes < (long long)t.total);
  assert_true(stored * 2 < t.total);
  /* The source keeps them as compiled. */
  assert_int_equal(ef_sql_int(t.f.src, "SELECT sum(length(cubin)) FROM binaries"), (long long)t.total);
  assert_int_equal(ef_sql_int(t.f.src, "SELECT count(*) FROM binaries WHERE substr(cubin, 1, 4) = x'7f454c46'"),
                   WINNERS);
  /* An export exported again holds the same cubins. */
  char again[400];
  snprintf(again, sizeof again, "%s/again.db", t.f.dir);
  export_ok(t.f.out, again);
  assert_cubins_read_back(&t, again);
  assert_int_equal(ef_sql_int(again, "SELECT count(*) FROM binaries WHERE substr(cubin, 1, 4) = CAST('STZ1' AS BLOB)"),
                   WINNERS);
  destroy(&t);
}

static void replace_blob(const char *path, const char *hash, const void *blob, size_t n) {
  sqlite3 *c = NULL;
  sqlite3_stmt *s = NULL;
  assert_int_equal(sqlite3_open_v2(path, &c, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(c, "UPDATE binaries SET cubin = ?1 WHERE source_hash = ?2", -1, &s, NULL),
                   SQLITE_OK);
  assert_int_equal(sqlite3_bind_blob64(s, 1, blob, n, SQLITE_STATIC), SQLITE_OK);
  assert_int_equal(sqlite3_bind_text(s, 2, hash, -1, SQLITE_STATIC), SQLITE_OK);
  assert_int_equal(sqlite3_step(s), SQLITE_DONE);
  assert_int_equal(sqlite3_changes(c), 1);
  sqlite3_finalize(s);
  assert_int_equal(sqlite3_close(c), SQLITE_OK);
}

/* The size field of a compressed blob (little-endian). */
static void set_size(unsigned char *blob, uint64_t v) {
  for (int k = 0; k < 8; k++) blob[4 + k] = (unsigned char)(v >> (8 * k));
}

/* An export's compressed cubin damaged in each way, then read. */
static void test_corrupt_compressed_cubins_are_refused(void **state) {
  (void)state;
  tuned t;
  build(&t);
  export_ok(t.f.src, t.f.out);
  char hash[40];
  hash_of(0, hash, sizeof hash);
  size_t n = 0;
  unsigned char *good = stored_blob(t.f.out, hash, &n);
  assert_memory_equal(good, "STZ1", 4);
  unsigned char *bad = malloc(n + 64);
  assert_non_null(bad);
  static const struct {
    const char *what, *expected;
  } cases[] = {
      {"stream cut short", "damaged or cut short"},
      {"stream damaged", "is corrupt"}, /* as zlib finds it: a bad code, a length or the checksum */
      {"recorded size one more", "bytes, not the"},
      {"recorded size one less", "inflates past the"},
      {"another format version", "format 'STZ' + byte 0x39 ('9')"},
      {"recorded size huge", "records a cubin of 1099511627776 bytes"},
      {"recorded size past the limit", "records a cubin of 268435457 bytes"},
      {"recorded size 0", "records a cubin of 0 bytes"},
      {"header only", "damaged or cut short"},
      {"header cut short", "shorter than its 12-byte header"},
      {"bytes after the stream", "bytes follow the end of its zlib stream"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    memcpy(bad, good, n);
    size_t len = n;
    switch (c) {
    case 0: len = HEADER + (n - HEADER) / 2; break;
    case 1: bad[HEADER + (n - HEADER) / 2] ^= 0x5a; break;
    case 2: set_size(bad, t.size[0] + 1); break;
    case 3: set_size(bad, t.size[0] - 1); break;
    case 4: bad[3] = '9'; break;
    case 5: set_size(bad, 1ULL << 40); break;
    case 6: set_size(bad, (256ULL << 20) + 1); break;
    case 7: set_size(bad, 0); break;
    case 8: len = HEADER; break;
    case 9: len = 7; break;
    default:
      memset(bad + n, 0xab, 64);
      len = n + 64;
      break;
    }
    replace_blob(t.f.out, hash, bad, len);
    st_db *db = NULL;
    st_err err = {{0}};
    if (st_db_open_readonly(t.f.out, &db, &err) != ST_OK) fail_msg("%s", err.msg);
    st_binary_row b;
    int found = -1;
    const st_status st = st_db_get_binary(db, hash, ARCH, NULL, &b, &found, &err);
    printf("# %s: %s\n", cases[c].what, err.msg);
    if (st != ST_ERR_DB || !strstr(err.msg, "the " ARCH " binary of source src_v0") ||
        !strstr(err.msg, cases[c].expected))
      fail_msg("%s: status %d, '%s' (want ST_ERR_DB and '%s')", cases[c].what, st, err.msg, cases[c].expected);
    assert_int_equal(found, 0);
    assert_null(b.cubin);
    assert_int_equal(b.cubin_size, 0);
    assert_null(b.log);
    /* The rows beside it still read. */
    char other[40];
    hash_of(1, other, sizeof other);
    assert_int_equal(st_db_get_binary(db, other, ARCH, NULL, &b, &found, &err), ST_OK);
    assert_int_equal(b.cubin_size, t.size[1]);
    st_db_binary_free(&b);
    st_db_close(db);
  }
  /* The blob put back whole reads back: the cases failed on what was changed. */
  replace_blob(t.f.out, hash, good, n);
  assert_cubins_read_back(&t, t.f.out);
  free(good);
  free(bad);
  destroy(&t);
}

static void test_tuned_database_keeps_cubins_as_compiled(void **state) {
  (void)state;
  tuned t;
  build(&t);
  assert_cubins_read_back(&t, t.f.src);
  for (int i = 0; i < WINNERS; i++) {
    char hash[40];
    hash_of(i, hash, sizeof hash);
    size_t n = 0;
    unsigned char *blob = stored_blob(t.f.src, hash, &n);
    assert_int_equal(n, t.size[i]);
    assert_memory_equal(blob, t.cubin[i], n);
    free(blob);
  }
  /* Bytes that begin as a compressed cubin would not read back as written:
   * refused. */
  st_db *db = NULL;
  st_err err = {{0}};
  if (st_db_open(t.f.src, ST_DB_READWRITE, &db, &err) != ST_OK) fail_msg("%s", err.msg);
  size_t n = 0;
  unsigned char *packed = pack(t.cubin[0], t.size[0], &n);
  st_binary_row b;
  memset(&b, 0, sizeof b);
  snprintf(b.source_hash, sizeof b.source_hash, "src_packed");
  snprintf(b.arch, sizeof b.arch, ARCH);
  snprintf(b.compiler, sizeof b.compiler, "13.0");
  b.ok = 1;
  b.cubin = packed;
  b.cubin_size = n;
  assert_int_equal(st_db_put_binary(db, &b, &err), ST_ERR_INVALID_ARG);
  assert_non_null(strstr(err.msg, "begins with 'STZ'"));
  free(packed);
  st_db_close(db);
  assert_int_equal(ef_sql_int(t.f.src, "SELECT count(*) FROM binaries WHERE source_hash = 'src_packed'"), 0);
  destroy(&t);
}

int main(void) {
  g_seed = st_test_seed("test_export_cubins");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_export_stores_cubins_compressed_and_reads_them_back),
      cmocka_unit_test(test_corrupt_compressed_cubins_are_refused),
      cmocka_unit_test(test_tuned_database_keeps_cubins_as_compiled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
