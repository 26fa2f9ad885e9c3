-- The schema of the SQLite store as releases before versioned migrations created it (mmvet_core/store.py:
-- CREATE TABLE IF NOT EXISTS, columns added one by one since). tests/test_store.py upgrades such a file in
-- place. Columns added later, absent here: usage.tokens, judge_checks.endpoint, judge_model, prompt, refs.
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    model_name TEXT NOT NULL,
    benchmark TEXT NOT NULL,          -- JSON: spec, name, version, subset, n_samples
    n_runs INTEGER NOT NULL,
    judge TEXT NOT NULL,              -- JSON JudgeSettings (never a key)
    status TEXT NOT NULL,             -- created, running, stopped, done, failed
    message TEXT NOT NULL DEFAULT '',
    results_format TEXT NOT NULL DEFAULT '',
    predictions TEXT NOT NULL,        -- JSON id -> prediction text
    owner TEXT NOT NULL DEFAULT '',   -- opaque visitor id (app), '' for the CLI
    fingerprint TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS grades (
    run_id TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    run_index INTEGER NOT NULL,
    status TEXT NOT NULL,             -- ok, fallback, bad_request_zero, error
    score REAL,
    content TEXT,
    judge_model TEXT,
    attempts TEXT NOT NULL,           -- JSON list of attempts (raw answer, temperature, params sent, tokens)
    error TEXT,
    flags TEXT NOT NULL DEFAULT '[]',
    updated_at REAL NOT NULL,
    PRIMARY KEY (run_id, sample_id, run_index)
);
CREATE TABLE IF NOT EXISTS overrides (
    run_id TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    score REAL NOT NULL,
    reason TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, sample_id)
);
CREATE TABLE IF NOT EXISTS judge_cache (
    fingerprint TEXT NOT NULL,
    prompt_sha TEXT NOT NULL,
    temperature REAL NOT NULL,
    k INTEGER NOT NULL,
    content TEXT,
    model TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    sent TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (fingerprint, prompt_sha, temperature, k)
);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,              -- our id; the Batch API's id is batch_id once created
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    status TEXT NOT NULL,             -- submitting, submitted, done, failed
    input_file_id TEXT,
    batch_id TEXT,
    requests TEXT NOT NULL,           -- JSON custom_id -> [prompt_sha, temperature, k]
    message TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS judge_checks (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    fingerprint TEXT NOT NULL,        -- JudgeSettings.fingerprint() of the checked judge
    judge TEXT NOT NULL,              -- JSON JudgeSettings (never a key)
    result TEXT NOT NULL              -- JSON judgecheck.JudgeCheckResult
);
CREATE INDEX IF NOT EXISTS judge_checks_by_judge ON judge_checks (fingerprint, created_at);
CREATE TABLE IF NOT EXISTS board_entries (
    id TEXT PRIMARY KEY,              -- the entry (stable across versions)
    run_id TEXT NOT NULL,             -- the run it was published from (may since be deleted)
    owner_hash TEXT NOT NULL,         -- leaderboard.owner_hash(owner token): who may rename / unpublish
    name TEXT NOT NULL,               -- display name: bounded plain text
    link TEXT NOT NULL DEFAULT '',    -- optional https link (validated)
    version INTEGER NOT NULL,         -- the current version (board_versions)
    published INTEGER NOT NULL DEFAULT 1,   -- 0: unpublished by its owner
    hidden INTEGER NOT NULL DEFAULT 0,      -- 1: hidden by the host
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS board_versions (
    entry_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    published_at REAL NOT NULL,
    meta TEXT NOT NULL,               -- JSON: frozen run metadata (judge, benchmark, runs, totals, date, ...)
    scores TEXT NOT NULL,             -- JSON: frozen per-sample scores {sample id: [score per judge run]}
    PRIMARY KEY (entry_id, version)
);
CREATE TABLE IF NOT EXISTS board_publishes (
    visitor TEXT NOT NULL,            -- hashed visitor id (rate limit of publishing)
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS usage (
    day TEXT NOT NULL,
    visitor TEXT NOT NULL,
    calls INTEGER NOT NULL,
    PRIMARY KEY (day, visitor)
);
CREATE TABLE IF NOT EXISTS run_keeping (
    run_id TEXT PRIMARY KEY,
    visitor TEXT NOT NULL DEFAULT '',
    host INTEGER NOT NULL DEFAULT 0,
    opened_at REAL NOT NULL,
    total REAL,
    total_stamp TEXT
);
CREATE INDEX IF NOT EXISTS run_keeping_visitor ON run_keeping (visitor);
CREATE TABLE IF NOT EXISTS run_pins (
    run_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (run_id, reason)
);
CREATE INDEX IF NOT EXISTS runs_owner ON runs (owner, created_at);
