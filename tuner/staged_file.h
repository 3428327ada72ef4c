/* staged_file.h - a file written beside its final name and moved into
 * place only when complete, so that a process killed on the way leaves no
 * half file under the final name (at most a staged one beside it, with a
 * name of its own that no later run reuses or trips over). */
#ifndef ST_STAGED_FILE_H
#define ST_STAGED_FILE_H

#include <stddef.h>

#include "error.h"

typedef struct st_staged_file {
  char final_path[4200];
  char path[4300]; /* "<final>.export-<pid>-<n>": created empty, mode 0666 less the umask */
} st_staged_file;

/* Creates the staged file (empty) beside `final_path`; `tag` names the
 * writer in its name ("export"). */
st_status st_staged_create(st_staged_file *f, const char *final_path, const char *tag, st_err *err);

/* Flushes the staged file to disk and moves it to the final path: with
 * `replace` over whatever file is there, else only when none is (an
 * existing one is kept, ST_ERR_INVALID_ARG). The staged file is gone
 * either way on success; on failure the caller still discards it. */
st_status st_staged_commit(st_staged_file *f, int replace, st_err *err);

/* Removes the staged file and the SQLite side files a writer may have
 * left beside it (-wal, -shm, -journal, -lock). */
void st_staged_discard(st_staged_file *f);

#endif
