/* writer_lock.h - one writer per database.
 *
 * A read-write handle holds an exclusive flock(2) on "<database>-lock" from
 * its open to its close. The lock belongs to the open file description, so
 * children forked meanwhile share it: a tuner's compile child keeps the
 * database locked for as long as it lives. The file names its holder (pid,
 * host, start time) for the message a second writer gets, and is removed by
 * the process that created it when it lets go.
 *
 * The lock is a file of its own, not the database: SQLite's POSIX locks are
 * dropped when the process closes any descriptor of the database file, so
 * a second descriptor on it would be a hazard whenever it closed.
 */
#ifndef ST_DB_WRITER_LOCK_H
#define ST_DB_WRITER_LOCK_H

#include <sys/types.h>

#include "error.h"

typedef struct st_writer_lock {
  int fd;      /* -1: not held                                   */
  pid_t owner; /* the process that took it (and removes the file) */
} st_writer_lock;

#define ST_WRITER_LOCK_NONE ((st_writer_lock){.fd = -1, .owner = 0})

/* Takes the lock of database `db_path`, waiting up to wait_ms while another
 * process holds it; then fails with ST_ERR_DB and a message naming that
 * process. */
st_status st_writer_lock_take(const char *db_path, int wait_ms, st_writer_lock *lock, st_err *err);

/* Lets go. In the process that took the lock, the lock file is removed
 * first; a forked child only closes its copy, and the lock stays with the
 * process that took it. */
void st_writer_lock_release(const char *db_path, st_writer_lock *lock);

#endif
