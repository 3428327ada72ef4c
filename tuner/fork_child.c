/* fork_child.c - child processes that never outlive the command (see
 * fork_child.h). */
#include "fork_child.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Exit code of a child whose parent died before it could ask to follow. */
#define ORPHAN_EXIT 125

st_status st_fork_child(st_db *db, pid_t *pid, st_err *err) {
  *pid = -1;
  st_status st = db ? st_db_detach(db, err) : ST_OK;
  if (st != ST_OK) return st;
  const pid_t parent = getpid();
  fflush(NULL); /* nothing buffered is written twice */
  const pid_t child = fork();
  if (child == 0) {
    /* The parent may have died before the request: then getppid() is no
     * longer its pid and no signal will come. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(ORPHAN_EXIT);
    *pid = 0;
    return ST_OK;
  }
  const int fork_errno = errno;
  if (db) st = st_db_attach(db, err);
  if (child < 0) return st_fail(err, ST_ERR_NOMEM, "fork: %s", strerror(fork_errno));
  if (st != ST_OK) {
    kill(child, SIGKILL);
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
    }
    return st;
  }
  *pid = child;
  return ST_OK;
}
