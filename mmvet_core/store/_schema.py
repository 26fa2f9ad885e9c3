"""The tables, written once for both databases (SQLAlchemy Core): what every query of the store is built from.

The migrations (``migrations/versions``) create exactly this schema; a test compares a migrated database with it
on both backends, so a change here without its migration fails. Columns keep the SQLite types of the first
releases (TEXT, REAL, INTEGER), except where PostgreSQL would hold less than SQLite did: REAL is 8 bytes there
(``DOUBLE PRECISION``; PostgreSQL's ``REAL`` has 4 and would round every timestamp), INTEGER is 64 bits
(``BIGINT``). JSON is kept as TEXT on both, byte for byte as ``json.dumps`` wrote it.
"""
from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

#: 8-byte floats on both databases (times, scores, temperatures that key the answer cache).
REAL = sa.REAL().with_variant(postgresql.DOUBLE_PRECISION(), "postgresql")
#: 64-bit integers on both databases (token counts, versions, flags 0/1).
INTEGER = sa.INTEGER().with_variant(sa.BIGINT(), "postgresql")


class Text(sa.types.TypeDecorator):
    """TEXT that PostgreSQL can always take: it refuses the NUL character anywhere in text, which SQLite stores.
    A NUL (only ever in hostile text: a judge's answer, a name) is written as U+FFFD there, instead of failing the
    write and the run with it. SQLite stores text as given, as it always did."""

    impl = sa.TEXT
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if dialect.name == "postgresql" and isinstance(value, str) and "\x00" in value:
            return value.replace("\x00", "\ufffd")
        return value


metadata = sa.MetaData()

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", Text, primary_key=True),
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("updated_at", REAL, nullable=False),
    sa.Column("model_name", Text, nullable=False),
    sa.Column("benchmark", Text, nullable=False),          # JSON: spec, name, version, subset, n_samples
    sa.Column("n_runs", INTEGER, nullable=False),
    sa.Column("judge", Text, nullable=False),              # JSON JudgeSettings (never a key)
    sa.Column("status", Text, nullable=False),             # created, running, stopped, done, failed
    sa.Column("message", Text, nullable=False, server_default=""),
    sa.Column("results_format", Text, nullable=False, server_default=""),
    sa.Column("predictions", Text, nullable=False),        # JSON id -> prediction text
    sa.Column("owner", Text, nullable=False, server_default=""),   # opaque visitor id (app), '' for the CLI
    sa.Column("fingerprint", Text, nullable=False, server_default=""),
    sa.Index("runs_owner", "owner", "created_at"),
)

grades = sa.Table(
    "grades", metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("sample_id", Text, primary_key=True),
    sa.Column("run_index", INTEGER, primary_key=True),
    sa.Column("status", Text, nullable=False),             # ok, fallback, bad_request_zero, error
    sa.Column("score", REAL),
    sa.Column("content", Text),
    sa.Column("judge_model", Text),
    sa.Column("attempts", Text, nullable=False),           # JSON list of attempts (raw answer, temperature, ...)
    sa.Column("error", Text),
    sa.Column("flags", Text, nullable=False, server_default="[]"),
    sa.Column("updated_at", REAL, nullable=False),
)

overrides = sa.Table(
    "overrides", metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("sample_id", Text, primary_key=True),
    sa.Column("score", REAL, nullable=False),
    sa.Column("reason", Text, nullable=False),
    sa.Column("created_at", REAL, nullable=False),
)

judge_cache = sa.Table(
    "judge_cache", metadata,
    sa.Column("fingerprint", Text, primary_key=True),
    sa.Column("prompt_sha", Text, primary_key=True),
    sa.Column("temperature", REAL, primary_key=True),
    sa.Column("k", INTEGER, primary_key=True),
    sa.Column("content", Text),
    sa.Column("model", Text),
    sa.Column("prompt_tokens", INTEGER),
    sa.Column("completion_tokens", INTEGER),
    sa.Column("sent", Text, nullable=False),
    sa.Column("created_at", REAL, nullable=False),
)

batches = sa.Table(
    "batches", metadata,
    sa.Column("id", Text, primary_key=True),               # our id; the Batch API's id is batch_id once created
    sa.Column("run_id", Text, nullable=False),
    sa.Column("round", INTEGER, nullable=False),
    sa.Column("status", Text, nullable=False),             # submitting, submitted, done, failed
    sa.Column("input_file_id", Text),
    sa.Column("batch_id", Text),
    sa.Column("requests", Text, nullable=False),           # JSON custom_id -> [prompt_sha, temperature, k]
    sa.Column("message", Text, nullable=False, server_default=""),
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("updated_at", REAL, nullable=False),
)

meta = sa.Table(
    "meta", metadata,
    sa.Column("key", Text, primary_key=True),
    sa.Column("value", Text, nullable=False),
)

judge_checks = sa.Table(
    "judge_checks", metadata,
    sa.Column("id", Text, primary_key=True),
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("fingerprint", Text, nullable=False),        # JudgeSettings.fingerprint() of the checked judge
    sa.Column("judge", Text, nullable=False),              # JSON JudgeSettings (never a key)
    sa.Column("result", Text, nullable=False),             # JSON judgecheck.JudgeCheckResult
    sa.Column("endpoint", Text, nullable=False, server_default=""),
    sa.Column("judge_model", Text, nullable=False, server_default=""),
    sa.Column("prompt", Text, nullable=False, server_default=""),
    sa.Column("refs", Text, nullable=False, server_default=""),
    # who made the check (`judgecheck.HOST` / `judgecheck.VISITOR`; "" before 0003: unverified) and, for a
    # visitor's check, the visitor's owner hash (only that visitor sees it)
    sa.Column("scope", Text, nullable=False, server_default=""),
    sa.Column("owner_hash", Text, nullable=False, server_default=""),
    sa.Index("judge_checks_by_judge", "fingerprint", "created_at"),
)

estimates = sa.Table(                                      # the one stored estimate per check and graded answers
    "estimates", metadata,
    sa.Column("check_id", Text, primary_key=True),
    sa.Column("inputs", Text, primary_key=True),          # `equivalence.estimate_inputs`: a digest of the grades
    sa.Column("result", Text, nullable=False),             # JSON equivalence.Equivalence
    sa.Column("created_at", REAL, nullable=False),
)

board_entries = sa.Table(
    "board_entries", metadata,
    sa.Column("id", Text, primary_key=True),               # the entry (stable across versions)
    sa.Column("run_id", Text, nullable=False),             # the run it was published from (may since be deleted)
    sa.Column("owner_hash", Text, nullable=False),         # leaderboard.owner_hash(owner token)
    sa.Column("name", Text, nullable=False),               # display name: bounded plain text
    sa.Column("link", Text, nullable=False, server_default=""),
    sa.Column("version", INTEGER, nullable=False),         # the current version (board_versions)
    sa.Column("published", INTEGER, nullable=False, server_default=sa.text("1")),   # 0: unpublished by its owner
    sa.Column("hidden", INTEGER, nullable=False, server_default=sa.text("0")),      # 1: hidden by the host
    sa.Column("created_at", REAL, nullable=False),
    sa.Column("updated_at", REAL, nullable=False),
)

board_versions = sa.Table(
    "board_versions", metadata,
    sa.Column("entry_id", Text, primary_key=True),
    sa.Column("version", INTEGER, primary_key=True),
    sa.Column("published_at", REAL, nullable=False),
    sa.Column("meta", Text, nullable=False),               # JSON: frozen run metadata
    sa.Column("scores", Text, nullable=False),             # JSON: frozen per-sample scores
)

board_publishes = sa.Table(
    "board_publishes", metadata,
    sa.Column("visitor", Text, nullable=False),            # hashed visitor id (rate limit of publishing)
    sa.Column("at", REAL, nullable=False),
)

usage = sa.Table(
    "usage", metadata,
    sa.Column("day", Text, primary_key=True),
    sa.Column("visitor", Text, primary_key=True),
    sa.Column("calls", INTEGER, nullable=False),
    sa.Column("tokens", INTEGER, nullable=False, server_default=sa.text("0")),
)

#: What keeps storage bounded (`mmvet_core/hosting/keeping.py`): who stored each app run (quota), whether it was graded
#: with the host's key, when anyone last opened it (expiry), its cached total (My runs).
run_keeping = sa.Table(
    "run_keeping", metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("visitor", Text, nullable=False, server_default=""),
    sa.Column("host", INTEGER, nullable=False, server_default=sa.text("0")),
    sa.Column("opened_at", REAL, nullable=False),
    sa.Column("total", REAL),
    sa.Column("total_stamp", Text),
    sa.Index("run_keeping_visitor", "visitor"),
)

#: Runs that never expire (e.g. a published leaderboard entry, reason ``published``).
run_pins = sa.Table(
    "run_pins", metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("reason", Text, primary_key=True),
)

#: Grading work shared by processes (`mmvet_core/runs/workers.py`, migration 0002): one row per run that a process is
#: grading or that a grading worker may take. A row lives while its run grades and goes when the run ends.
grading_queue = sa.Table(
    "grading_queue", metadata,
    sa.Column("run_id", Text, primary_key=True),
    sa.Column("endpoint", Text, nullable=False),           # the judge endpoint (workers.endpoint_of), '' none
    sa.Column("claimable", INTEGER, nullable=False, server_default=sa.text("0")),  # 1: any worker may take it
    sa.Column("holder", Text),                             # the process grading it; NULL: waiting for a worker
    sa.Column("lease_until", REAL),                        # database clock: past it, the holder is gone
    sa.Column("visitor", Text, nullable=False, server_default=""),
    sa.Column("work", Text, nullable=False),               # JSON: judge settings (never a key), host, mode...
    sa.Column("stop", INTEGER, nullable=False, server_default=sa.text("0")),        # 1: Stop was pressed
    sa.Column("claims", INTEGER, nullable=False, server_default=sa.text("0")),      # times a process took it
    sa.Column("waiting_until", REAL),                      # wall clock: its calls wait out a rate limit
    sa.Column("enqueued_at", REAL, nullable=False),
    sa.Column("claimed_at", REAL),
    sa.Index("grading_queue_claim", "claimable", "enqueued_at"),
)

#: One judge account's rate-limit state, shared by every process that calls it (`mmvet_core/judging/sharedlimit.py`).
judge_pace = sa.Table(
    "judge_pace", metadata,
    sa.Column("account", Text, primary_key=True),          # ratelimit.account_key: a hash, never a key
    sa.Column("state", Text, nullable=False),              # JSON: the mirror of the server's buckets
    sa.Column("paused_until", REAL, nullable=False, server_default=sa.text("0")),   # database clock
    sa.Column("updated_at", REAL, nullable=False),
)
