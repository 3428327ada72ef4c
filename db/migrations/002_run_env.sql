-- 002_run_env.sql - schema v2: every run keeps the environment it ran in (issue #53).
--
-- env is a JSON object the tuner writes when the run starts: driver and
-- NVRTC versions, the card's name, UUID, multiprocessor count and clocks,
-- the project version, hashes of the generator/ and templates/ trees, the
-- suite and the seed (docs/method.md, "Comparing runs"). The devices table
-- keeps only a card's latest driver; env keeps the one each run saw.
-- Runs recorded before this migration get '{}': nothing is known of them.
ALTER TABLE runs ADD COLUMN env TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(env));
