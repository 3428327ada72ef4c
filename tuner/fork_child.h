/* fork_child.h - child processes that never outlive the command and never
 * inherit a database connection.
 *
 * The tuner forks a compiler process, a worker per shape and a device
 * probe. Each child is killed when the process that forked it dies, however
 * it dies (kill -9 included), so that no orphan goes on writing to a
 * database whose lock its parent held. The database handle is detached
 * across the fork (st_db_detach): SQLite's locks belong to the process, and
 * a connection, or SQLite's state for the file, copied into a child can
 * corrupt the file once either side uses it. */
#ifndef ST_FORK_CHILD_H
#define ST_FORK_CHILD_H

#include <sys/types.h>

#include "error.h"
#include "st_db.h"

/* fork() from the calling thread, which the child must not outlive either
 * (the kernel's parent-death signal follows the thread that forked).
 * `db`, when not NULL, is detached across the fork: the parent gets its
 * connection back before this returns; the child gets the handle detached
 * and may st_db_attach it to work under the parent's writer lock. *pid is
 * the child's pid in the parent and 0 in the child, as fork() returns; on
 * failure no child runs (ST_ERR_NOMEM: no fork; ST_ERR_DB: the database
 * could not be attached again). */
st_status st_fork_child(st_db *db, pid_t *pid, st_err *err);

#endif
