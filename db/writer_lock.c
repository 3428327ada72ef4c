/* writer_lock.c - one writer per database (see writer_lock.h). */
#include "writer_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOCK_SUFFIX "-lock"
#define POLL_MS 20

static void lock_path(const char *db_path, char *out, size_t cap) { snprintf(out, cap, "%s" LOCK_SUFFIX, db_path); }

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

/* "pid 1234 on HOST since 2026-11-28T17:40:01Z", what a waiting writer reads. */
static void write_holder(int fd) {
  char host[128] = "?";
  (void)gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  char since[32] = "";
  const time_t t = time(NULL);
  struct tm tm;
  if (gmtime_r(&t, &tm)) strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", &tm);
  char text[256];
  const int n = snprintf(text, sizeof text, "pid %ld on %s since %s\n", (long)getpid(), host, since);
  /* Best effort: the lock itself is the flock; the text only explains it. */
  if (ftruncate(fd, 0) == 0 && n > 0) (void)!pwrite(fd, text, (size_t)n, 0);
}

/* The command line of process `pid` on this host, spaces for NULs, or "". */
static void command_of(long pid, char *out, size_t cap) {
  out[0] = '\0';
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
  FILE *f = fopen(path, "rb");
  if (!f) return;
  size_t n = fread(out, 1, cap - 1, f);
  fclose(f);
  out[n] = '\0';
  for (size_t i = 0; i + 1 < n; i++)
    if (out[i] == '\0') out[i] = ' ';
}

/* Who holds the lock, from its file: "pid 1234 on HOST since T: COMMAND". */
static void describe_holder(int fd, char *out, size_t cap) {
  char text[256];
  const ssize_t n = pread(fd, text, sizeof text - 1, 0);
  text[n > 0 ? n : 0] = '\0';
  text[strcspn(text, "\n")] = '\0';
  long pid = 0;
  char host[128] = "", mine[128] = "";
  if (!text[0] || sscanf(text, "pid %ld on %127s", &pid, host) != 2) {
    snprintf(out, cap, "a process that has not yet said who it is");
    return;
  }
  (void)gethostname(mine, sizeof mine - 1);
  char cmd[200] = "";
  if (!strcmp(host, mine)) command_of(pid, cmd, sizeof cmd);
  snprintf(out, cap, "%s%s%s", text, cmd[0] ? ": " : "", cmd);
}

/* Whether `fd` is still the file at `path`: a holder that let go removed
 * the file it locked, and a new one may stand there now. */
static int still_at_path(int fd, const char *path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

st_status st_writer_lock_take(const char *db_path, int wait_ms, st_writer_lock *lock, st_err *err) {
  *lock = ST_WRITER_LOCK_NONE;
  char path[4096 + sizeof LOCK_SUFFIX];
  lock_path(db_path, path, sizeof path);
  const double deadline = now_ms() + wait_ms;
  for (;;) {
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
      return st_fail(err, ST_ERR_DB, "database '%s': cannot create its writer lock '%s': %s", db_path, path,
                     strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      if (still_at_path(fd, path)) {
        write_holder(fd);
        lock->fd = fd;
        lock->owner = getpid();
        return ST_OK;
      }
      close(fd); /* a stale file its holder removed: take the new one */
      continue;
    }
    const int why = errno;
    if (why != EWOULDBLOCK && why != EINTR) {
      close(fd);
      return st_fail(err, ST_ERR_DB, "database '%s': locking '%s' for writing: %s", db_path, path, strerror(why));
    }
    if (now_ms() >= deadline) {
      char holder[512];
      describe_holder(fd, holder, sizeof holder);
      close(fd);
      return st_fail(err, ST_ERR_DB,
                     "database '%s' is being written by another process (%s); sparsetune allows one writer "
                     "per database: wait for it to finish, or stop it",
                     db_path, holder);
    }
    close(fd);
    sleep_ms(POLL_MS);
  }
}

void st_writer_lock_release(const char *db_path, st_writer_lock *lock) {
  if (lock->fd < 0) return;
  if (lock->owner == getpid()) {
    char path[4096 + sizeof LOCK_SUFFIX];
    lock_path(db_path, path, sizeof path);
    /* Removed while still held: a waiter that opened this file sees it is
     * no longer at the path once it gets it, and opens the new one. */
    (void)unlink(path);
  }
  close(lock->fd);
  *lock = ST_WRITER_LOCK_NONE;
}
