/* commands.h - the `sparsetune` subcommands; each takes its own argv
 * (argv[0] = the command name) and returns the process exit code. */
#ifndef ST_COMMANDS_H
#define ST_COMMANDS_H

int st_cmd_generate(int argc, char **argv);
int st_cmd_compile(int argc, char **argv);
int st_cmd_tune(int argc, char **argv);
int st_cmd_bench(int argc, char **argv);
int st_cmd_show(int argc, char **argv);
int st_cmd_regress(int argc, char **argv);
int st_cmd_history(int argc, char **argv);
int st_cmd_report(int argc, char **argv);
int st_cmd_merge(int argc, char **argv);
int st_cmd_eval(int argc, char **argv);
int st_cmd_export(int argc, char **argv);
int st_cmd_builtin(int argc, char **argv);

#endif
