/* cmd_in_process.h - a sparsetune command run in the test's own process:
 * `st_test_cmd(st_cmd_history, "history", (const char *[]){"--db", p,
 * NULL})` builds the argv (copies: getopt may permute it) and returns the
 * command's exit code. At most ST_TEST_CMD_ARGS arguments. */
#ifndef ST_TEST_CMD_IN_PROCESS_H
#define ST_TEST_CMD_IN_PROCESS_H

#include <stdio.h>

#include "testutil.h"

#define ST_TEST_CMD_ARGS 15

static inline int st_test_cmd(int (*cmd)(int, char **), const char *name, const char *const *args) {
  char copies[ST_TEST_CMD_ARGS + 1][4200];
  char *argv[ST_TEST_CMD_ARGS + 2];
  int argc = 0;
  snprintf(copies[0], sizeof copies[0], "%s", name);
  argv[argc++] = copies[0];
  for (int i = 0; args[i]; i++) {
    if (i == ST_TEST_CMD_ARGS) fail_msg("st_test_cmd: more than %d arguments", ST_TEST_CMD_ARGS);
    snprintf(copies[argc], sizeof copies[argc], "%s", args[i]);
    argv[argc] = copies[argc];
    argc++;
  }
  argv[argc] = NULL;
  return cmd(argc, argv);
}

#endif
