-- 001_init.sql - schema v1 of the sparsetune database.
--
-- Applied by db/db_write.c inside one transaction, which then sets
-- PRAGMA user_version = 1 and PRAGMA application_id = 0x53705475 ("SpTu").
-- A migration file holds no BEGIN/COMMIT and no PRAGMA of its own.
--
-- Conventions:
--  - Parameters (kernel, launch, shape, dispatch) are canonical JSON objects
--    as st_params_to_json writes them: keys sorted, integers bare.
--  - Times are UTC text, ISO 8601 with milliseconds ("2025-01-31T12:00:00.000Z").
--  - Ids of sources and variants are content hashes (32 hex digits), so a row
--    is never rewritten under the same id; history is kept by keeping rows.

-- Applied migrations, one row each (user_version is the authority).
CREATE TABLE schema_migrations (
  version INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  applied TEXT NOT NULL
);

-- Free-form facts about the file (creation time, tool that created it).
CREATE TABLE meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

INSERT INTO meta (key, value) VALUES ('created', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

-- One row per physical card (uuid); the runtime matches a model by name + arch.
CREATE TABLE devices (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE CHECK (uuid <> ''),
  name TEXT NOT NULL,
  arch TEXT NOT NULL,
  cc_major INTEGER NOT NULL,
  cc_minor INTEGER NOT NULL,
  sm_count INTEGER NOT NULL,
  mem_bytes INTEGER NOT NULL,
  l2_bytes INTEGER NOT NULL,
  driver_version INTEGER NOT NULL,
  first_seen TEXT NOT NULL,
  last_seen TEXT NOT NULL
);
CREATE INDEX devices_model ON devices (name, arch);

-- Rendered kernel sources, by hash of their text (binaries dedupe on it).
CREATE TABLE sources (
  hash TEXT PRIMARY KEY,
  op TEXT NOT NULL,
  kernel_params TEXT NOT NULL CHECK (json_valid(kernel_params)),
  text TEXT NOT NULL,
  created TEXT NOT NULL
);

-- Variants: (op, kernel config, launch config) over one source.
-- `name` is stable across template changes (ids are not), so it is not unique.
CREATE TABLE variants (
  id TEXT PRIMARY KEY,
  op TEXT NOT NULL,
  name TEXT NOT NULL,
  source_hash TEXT NOT NULL REFERENCES sources (hash),
  kernel_params TEXT NOT NULL CHECK (json_valid(kernel_params)),
  launch_params TEXT NOT NULL CHECK (json_valid(launch_params)),
  is_default INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1)),
  created TEXT NOT NULL
);
CREATE INDEX variants_op_name ON variants (op, name);
CREATE INDEX variants_source ON variants (source_hash);
CREATE INDEX variants_default ON variants (op) WHERE is_default = 1;

-- Compiler output per (source, arch, compiler version). `ok` = 0 keeps the
-- failure and its log so it is not retried. Newest row = highest rowid.
CREATE TABLE binaries (
  source_hash TEXT NOT NULL REFERENCES sources (hash),
  arch TEXT NOT NULL,
  compiler TEXT NOT NULL,
  ok INTEGER NOT NULL CHECK (ok IN (0, 1)),
  cubin BLOB,
  registers INTEGER NOT NULL DEFAULT 0,
  spill_bytes INTEGER NOT NULL DEFAULT 0,
  shared_bytes INTEGER NOT NULL DEFAULT 0,
  local_bytes INTEGER NOT NULL DEFAULT 0,
  compile_ms REAL NOT NULL DEFAULT 0,
  log TEXT NOT NULL DEFAULT '',
  created TEXT NOT NULL,
  UNIQUE (source_hash, arch, compiler)
);

-- Shapes of the suites. `key` holds every shape parameter, `dispatch_key`
-- the host-known subset that winners are chosen per.
CREATE TABLE shapes (
  op TEXT NOT NULL,
  key TEXT NOT NULL,
  params TEXT NOT NULL CHECK (json_valid(params)),
  dispatch_key TEXT NOT NULL,
  PRIMARY KEY (op, key)
) WITHOUT ROWID;
CREATE INDEX shapes_dispatch ON shapes (op, dispatch_key);

-- Every tuning or benchmark run is kept (regression history). AUTOINCREMENT:
-- a run id is never reused, even after rows are deleted.
CREATE TABLE runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL CHECK (kind IN ('tune', 'bench')),
  op TEXT NOT NULL,
  suite TEXT NOT NULL,
  device_id INTEGER NOT NULL REFERENCES devices (id),
  status TEXT NOT NULL CHECK (status IN ('running', 'done', 'interrupted', 'failed')),
  started TEXT NOT NULL,
  finished TEXT NOT NULL DEFAULT '',
  args TEXT NOT NULL DEFAULT '',
  tool_version TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_resume ON runs (kind, op, suite, device_id, args, status);

-- One timing (or failure) of a variant on a shape within a run. Times are
-- microseconds per launch; spread = (max - min) / median of the repetitions;
-- samples is a JSON array of per-repetition microseconds.
CREATE TABLE measurements (
  run_id INTEGER NOT NULL REFERENCES runs (id),
  variant_id TEXT NOT NULL REFERENCES variants (id),
  shape_key TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ok', 'wrong', 'failed', 'pruned')),
  error TEXT NOT NULL DEFAULT '',
  median_us REAL NOT NULL DEFAULT 0,
  min_us REAL NOT NULL DEFAULT 0,
  max_us REAL NOT NULL DEFAULT 0,
  spread REAL NOT NULL DEFAULT 0,
  reps INTEGER NOT NULL DEFAULT 0,
  iters INTEGER NOT NULL DEFAULT 0,
  max_err REAL NOT NULL DEFAULT 0,
  samples TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(samples)),
  recorded TEXT NOT NULL,
  PRIMARY KEY (run_id, variant_id, shape_key)
);
CREATE INDEX measurements_history ON measurements (variant_id, shape_key);

-- The best variant per (card, op, dispatch key). median_us is the worst case
-- over the dispatch key's shapes, regret = that / the best time over them.
-- Newest row = highest rowid (the runtime's tie-break between cards).
CREATE TABLE winners (
  device_id INTEGER NOT NULL REFERENCES devices (id),
  op TEXT NOT NULL,
  dispatch_key TEXT NOT NULL,
  dispatch_params TEXT NOT NULL CHECK (json_valid(dispatch_params)),
  variant_id TEXT NOT NULL REFERENCES variants (id),
  run_id INTEGER REFERENCES runs (id),
  median_us REAL NOT NULL,
  regret REAL NOT NULL DEFAULT 1,
  default_variant_id TEXT REFERENCES variants (id),
  default_us REAL NOT NULL DEFAULT 0,
  updated TEXT NOT NULL,
  UNIQUE (device_id, op, dispatch_key)
);
CREATE INDEX winners_variant ON winners (variant_id);
