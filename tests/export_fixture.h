/* export_fixture.h - a tuned database to export, and `sparsetune` run as a
 * process, for the export suites.
 *
 * The source (ef_build) holds three cards of two models, four runs with
 * measurements, nine variants with ~100 KB sources each, binaries for two
 * architectures (an older compiler's row under a newer one, a failed
 * compile, defaults' and unreferenced variants' cubins) and seven winners,
 * one of them superseded by a newer card's row of the same model. What an
 * export of it must hold is spelled out beside the data (EF_*). */
#ifndef ST_TEST_EXPORT_FIXTURE_H
#define ST_TEST_EXPORT_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EF_H200 "NVIDIA H200"
#define EF_A100 "NVIDIA A100-SXM4-80GB"

/* The winners an unfiltered export holds (of 7; one superseded), the
 * variants they name (their own and their defaults) and the binaries the
 * runtime would load for them (one winner's only compile failed). */
#define EF_WINNERS 6
#define EF_VARIANTS 6
#define EF_BINARIES 5

typedef struct ef_fixture {
  char dir[256];     /* a fresh folder holding the files below        */
  char src[320];     /* the tuned database                            */
  char out[320];     /* where the export goes (absent at first)       */
  int64_t run_bench; /* a bench run no winner refers to            */
} ef_fixture;

/* Builds the source in a new folder; cubins of `cubin_bytes` each. */
void ef_build(ef_fixture *f, size_t cubin_bytes, uint64_t seed);
/* Removes the folder and everything in it. */
void ef_destroy(ef_fixture *f);

/* Runs `sparsetune ARGS...` (args NULL-terminated) to its end; returns its
 * exit code (128 + signal when killed) and, when out is not NULL, its
 * stdout and stderr as one malloc'ed string. */
int ef_run(char **out, const char *const *args);
#define EF_RUN(out, ...) ef_run((out), (const char *const[]){__VA_ARGS__, NULL})
/* Starts it without waiting, output discarded. */
pid_t ef_start(const char *const *args);
/* Waits for a started one: its exit code, or 128 + the signal. */
int ef_wait(pid_t pid);

/* XXH3 of a file's bytes. */
uint64_t ef_hash_file(const char *path);
int ef_exists(const char *path);
/* Names in f->dir that a finished command must not leave: staged files
 * (".export-") and SQLite's side files (-wal, -shm, -journal, -lock), as
 * one malloc'ed string ("" for none). */
char *ef_strays(const ef_fixture *f);

/* A query's first column of its first row, through a plain read-only
 * connection: an integer, or malloc'ed text. */
long long ef_sql_int(const char *path, const char *sql);
char *ef_sql_text(const char *path, const char *sql);

#endif
