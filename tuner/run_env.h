/* run_env.h - the environment a run ran in, as the JSON text of runs.env.
 *
 * Written once when a run starts (tune, bench) so that `history` can say
 * what changed between two runs even where the devices table no longer
 * knows (it keeps a card's latest driver only). The object is flat; every
 * key is documented in docs/method.md, "Comparing runs":
 *   tool_version    the project version (ST_VERSION)
 *   driver          cuDriverGetVersion (13000 = 13.0) as the card's probe read
 *                   it, null without a card
 *   nvrtc           "13.0", nvrtcVersion of the NVRTC the tuner links
 *   gpu_name, gpu_uuid, sm_count   the run's card; absent without one
 *   generator_hash, templates_hash  st_run_env_tree_hash of the folders read
 *   suite, seed     what the run was asked for
 * Current clocks are not recorded: the driver API only gives rated ones,
 * current clocks need NVML, which sparsetune does not load. */
#ifndef ST_RUN_ENV_H
#define ST_RUN_ENV_H

#include <stddef.h>

#include "device_info.h"
#include "error.h"
#include "identity.h"

/* What the caller knows; NVRTC is asked here, the driver never (see
 * st_run_env_json). */
typedef struct st_run_env_in {
  const st_device_info *dev; /* the run's card; NULL: none                 */
  const char *generator_dir; /* folders the generator was opened on        */
  const char *templates_dir;
  const char *suite;
  unsigned long long seed;
} st_run_env_in;

/* Longest env text st_run_env_json writes, NUL included (st_run_row.env). */
#define ST_RUN_ENV_CAP 2048

/* Writes the env object of `in` to out[cap]. The driver's version is the
 * card's (dev->driver_version, from the forked probe): this process must
 * not initialize the driver before it forks its workers. Without a card
 * "driver" is null.
 * ST_ERR_INVALID_ARG when a folder cannot be hashed or the text does not
 * fit; err says which. */
st_status st_run_env_json(const st_run_env_in *in, char *out, size_t cap, st_err *err);

/* The content hash of a folder: XXH3-128 (st_hash_hex) of the lines
 * "<path relative to dir>\t<st_hash_hex of the file>\n" of every regular
 * file below it, in byte order of the paths; dot-files are skipped. So
 * renaming, adding, removing or editing any file changes it, and nothing
 * else (times, owners) does. */
st_status st_run_env_tree_hash(const char *dir, char out[ST_HASH_HEX_LEN + 1], st_err *err);

/* The value of top-level `key` of the JSON object `env` (read by SQLite's
 * JSON functions), as text: a string unescaped, a number, true, false or
 * null as JSON writes them, an object or array as JSON text; cut to cap.
 * Returns 1 and fills out[cap] when the key is there, 0 when not (or env is
 * not a JSON object, or the key holds a '"'). */
int st_run_env_get(const char *env, const char *key, char *out, size_t cap);

#endif
