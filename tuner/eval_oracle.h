/* eval_oracle.h - whether an eval's oracle database already holds a
 * finished tune of its shapes, which a later eval of the same seed reuses
 * instead of tuning them again. */
#ifndef ST_EVAL_ORACLE_H
#define ST_EVAL_ORACLE_H

#include <stdint.h>

/* The id of the newest tune in database `path` that finished ("done")
 * with runs.args `args` (run_args.h, st_tune_run_args) on a card of model
 * `device`; 0 when there is none, or no readable database at `path` (then
 * the tune that follows says what is wrong with it). Only reads: a missing
 * file is not created. */
int64_t st_eval_finished_tune(const char *path, const char *args, const char *device);

#endif
