/* show_search.h - `sparsetune show run ID --search model`: what the tune's
 * search model (search_model.h) would have left out of a run that timed
 * every variant, and what that would have cost, per op.
 *
 * The run's shapes are taken in its suite's order (the order `tune` runs
 * them in, from the generator), its measurements from the database, which
 * is only read; what applies to a shape is what the run measured on it
 * (the competition search_model.h judges against). A shape's cost is the best time among the variants the
 * model keeps against the best of all: kept / best - 1. */
#ifndef ST_SHOW_SEARCH_H
#define ST_SHOW_SEARCH_H

#include <stdint.h>

#include "cli.h"
#include "st_db.h"

st_status st_show_search_replay(const st_cli *cli, st_db *db, int64_t run_id, st_err *err);

#endif
