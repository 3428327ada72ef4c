/* staged_file.c - a file written beside its final name, moved into place
 * when complete (staged_file.h). */
#include "staged_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "path.h"

st_status st_staged_create(st_staged_file *f, const char *final_path, const char *tag, st_err *err) {
  memset(f, 0, sizeof *f);
  if ((size_t)snprintf(f->final_path, sizeof f->final_path, "%s", final_path) >= sizeof f->final_path)
    return st_fail(err, ST_ERR_INVALID_ARG, "path '%.64s...' is too long", final_path);
  /* The pid and a count make the name: a staged file left by a killed run
   * (another pid, or this pid reused) is never opened again, only passed. */
  for (int n = 0; n < 1000; n++) {
    snprintf(f->path, sizeof f->path, "%s.%s-%ld-%d", final_path, tag, (long)getpid(), n);
    const int fd = open(f->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      close(fd);
      return ST_OK;
    }
    if (errno != EEXIST) break;
  }
  const st_status st =
      st_fail(err, ST_ERR_INVALID_ARG, "cannot create '%s' beside '%s': %s", f->path, final_path, strerror(errno));
  f->path[0] = '\0';
  return st;
}

static st_status sync_path(const char *path, int flags, st_err *err) {
  const int fd = open(path, flags | O_CLOEXEC);
  if (fd < 0) return st_fail(err, ST_ERR_INVALID_ARG, "cannot open '%s': %s", path, strerror(errno));
  const int rc = fsync(fd);
  const int saved = errno;
  close(fd);
  if (rc != 0) return st_fail(err, ST_ERR_INVALID_ARG, "cannot flush '%s' to disk: %s", path, strerror(saved));
  return ST_OK;
}

/* The move itself is made durable by flushing the folder; a file system
 * that cannot flush a folder has nothing to make durable there. */
static void sync_folder(const char *path) {
  char dir[4200];
  if (st_path_folder(path, dir, sizeof dir) != 0) return;
  st_err ignored;
  (void)sync_path(dir, O_RDONLY | O_DIRECTORY, &ignored);
}

static st_status exists_error(const st_staged_file *f, st_err *err) {
  return st_fail(err, ST_ERR_INVALID_ARG, "'%s' exists; it is kept", f->final_path);
}

/* Without `replace`: link() fails on an existing name, so no file that
 * appeared since the caller looked is replaced. File systems without hard
 * links get a look and a rename. */
static st_status move_no_replace(st_staged_file *f, st_err *err) {
  if (link(f->path, f->final_path) == 0) {
    (void)unlink(f->path);
    return ST_OK;
  }
  if (errno == EEXIST) return exists_error(f, err);
  if (access(f->final_path, F_OK) == 0) return exists_error(f, err);
  if (rename(f->path, f->final_path) != 0)
    return st_fail(err, ST_ERR_INVALID_ARG, "cannot move '%s' to '%s': %s", f->path, f->final_path, strerror(errno));
  return ST_OK;
}

st_status st_staged_commit(st_staged_file *f, int replace, st_err *err) {
  st_status st = sync_path(f->path, O_RDONLY, err);
  if (st != ST_OK) return st;
  if (!replace)
    st = move_no_replace(f, err);
  else if (rename(f->path, f->final_path) != 0)
    st = st_fail(err, ST_ERR_INVALID_ARG, "cannot move '%s' to '%s': %s", f->path, f->final_path, strerror(errno));
  if (st != ST_OK) return st;
  sync_folder(f->final_path);
  f->path[0] = '\0';
  return ST_OK;
}

void st_staged_discard(st_staged_file *f) {
  if (!f->path[0]) return;
  static const char *const sides[] = {"", "-wal", "-shm", "-journal", "-lock"};
  for (size_t i = 0; i < sizeof sides / sizeof sides[0]; i++) {
    char p[4400];
    snprintf(p, sizeof p, "%s%s", f->path, sides[i]);
    (void)unlink(p);
  }
  f->path[0] = '\0';
}
