/* run_change.h - what differs between two runs as they recorded it (card,
 * driver, tool version, arguments, and runs.env's NVRTC, template and
 * generator hashes and SM count): the "what changed" of `history`'s change
 * points and of `regress`. */
#ifndef ST_RUN_CHANGE_H
#define ST_RUN_CHANGE_H

#include <stddef.h>
#include <stdio.h>

#include "st_db.h"

/* The driver run `r` saw (cuDriverGetVersion): its env's, else the devices
 * row of its card (the card's newest; all a run from before schema 2 has),
 * 0 when neither says. */
st_status st_run_driver(st_db *db, const st_run_row *r, int *driver, st_err *err);

/* What differs from run a to run b, "; "-separated ("driver 12080 ->
 * 13000; templates 1a2b3c4d -> 5e6f7a8b"), hashes cut to 8 hex digits;
 * empty when nothing either recorded differs (a run without an env key
 * differs in nothing on it). driver_a/b: st_run_driver's. */
void st_run_change(const st_run_row *a, int driver_a, const st_run_row *b, int driver_b, char *buf, size_t cap);

/* The same in full, as JSON object members (no braces): "card",
 * "driver_version", "tool_version", "args" and each env key st_run_change
 * reads, every one [a's, b's] (null where a run did not record it). */
void st_run_change_json(FILE *out, const st_run_row *a, int driver_a, const st_run_row *b, int driver_b);

#endif
