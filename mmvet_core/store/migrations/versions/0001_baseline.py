"""Baseline: the schema of the releases before versioned migrations, on either database.

A new database gets every table. A SQLite database made by an earlier release (tables created with ``CREATE
TABLE IF NOT EXISTS``, columns added one by one since) is adopted in place: tables it lacks are created, columns
it lacks are added with their defaults, nothing it holds is touched. The schema below is frozen: a later change
is a new revision, never an edit here.

Revision ID: 0001
Revises:
Create Date: 2026-12-04
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TEXT = sa.TEXT()
REAL = sa.REAL().with_variant(postgresql.DOUBLE_PRECISION(), "postgresql")
INTEGER = sa.INTEGER().with_variant(sa.BIGINT(), "postgresql")
ZERO, ONE = sa.text("0"), sa.text("1")


def _col(name, type_, *, pk=False, null=True, default=None):
    return sa.Column(name, type_, primary_key=pk, nullable=null and not pk, server_default=default)


def _tables() -> dict[str, list[sa.Column]]:
    return {
        "runs": [_col("id", TEXT, pk=True), _col("created_at", REAL, null=False),
                 _col("updated_at", REAL, null=False), _col("model_name", TEXT, null=False),
                 _col("benchmark", TEXT, null=False), _col("n_runs", INTEGER, null=False),
                 _col("judge", TEXT, null=False), _col("status", TEXT, null=False),
                 _col("message", TEXT, null=False, default=""), _col("results_format", TEXT, null=False, default=""),
                 _col("predictions", TEXT, null=False), _col("owner", TEXT, null=False, default=""),
                 _col("fingerprint", TEXT, null=False, default="")],
        "grades": [_col("run_id", TEXT, pk=True), _col("sample_id", TEXT, pk=True),
                   _col("run_index", INTEGER, pk=True), _col("status", TEXT, null=False), _col("score", REAL),
                   _col("content", TEXT), _col("judge_model", TEXT), _col("attempts", TEXT, null=False),
                   _col("error", TEXT), _col("flags", TEXT, null=False, default="[]"),
                   _col("updated_at", REAL, null=False)],
        "overrides": [_col("run_id", TEXT, pk=True), _col("sample_id", TEXT, pk=True),
                      _col("score", REAL, null=False), _col("reason", TEXT, null=False),
                      _col("created_at", REAL, null=False)],
        "judge_cache": [_col("fingerprint", TEXT, pk=True), _col("prompt_sha", TEXT, pk=True),
                        _col("temperature", REAL, pk=True), _col("k", INTEGER, pk=True), _col("content", TEXT),
                        _col("model", TEXT), _col("prompt_tokens", INTEGER), _col("completion_tokens", INTEGER),
                        _col("sent", TEXT, null=False), _col("created_at", REAL, null=False)],
        "batches": [_col("id", TEXT, pk=True), _col("run_id", TEXT, null=False), _col("round", INTEGER, null=False),
                    _col("status", TEXT, null=False), _col("input_file_id", TEXT), _col("batch_id", TEXT),
                    _col("requests", TEXT, null=False), _col("message", TEXT, null=False, default=""),
                    _col("created_at", REAL, null=False), _col("updated_at", REAL, null=False)],
        "meta": [_col("key", TEXT, pk=True), _col("value", TEXT, null=False)],
        "judge_checks": [_col("id", TEXT, pk=True), _col("created_at", REAL, null=False),
                         _col("fingerprint", TEXT, null=False), _col("judge", TEXT, null=False),
                         _col("result", TEXT, null=False), _col("endpoint", TEXT, null=False, default=""),
                         _col("judge_model", TEXT, null=False, default=""),
                         _col("prompt", TEXT, null=False, default=""), _col("refs", TEXT, null=False, default="")],
        "board_entries": [_col("id", TEXT, pk=True), _col("run_id", TEXT, null=False),
                          _col("owner_hash", TEXT, null=False), _col("name", TEXT, null=False),
                          _col("link", TEXT, null=False, default=""), _col("version", INTEGER, null=False),
                          _col("published", INTEGER, null=False, default=ONE),
                          _col("hidden", INTEGER, null=False, default=ZERO),
                          _col("created_at", REAL, null=False), _col("updated_at", REAL, null=False)],
        "board_versions": [_col("entry_id", TEXT, pk=True), _col("version", INTEGER, pk=True),
                           _col("published_at", REAL, null=False), _col("meta", TEXT, null=False),
                           _col("scores", TEXT, null=False)],
        "board_publishes": [_col("visitor", TEXT, null=False), _col("at", REAL, null=False)],
        "usage": [_col("day", TEXT, pk=True), _col("visitor", TEXT, pk=True), _col("calls", INTEGER, null=False),
                  _col("tokens", INTEGER, null=False, default=ZERO)],
        "run_keeping": [_col("run_id", TEXT, pk=True), _col("visitor", TEXT, null=False, default=""),
                        _col("host", INTEGER, null=False, default=ZERO), _col("opened_at", REAL, null=False),
                        _col("total", REAL), _col("total_stamp", TEXT)],
        "run_pins": [_col("run_id", TEXT, pk=True), _col("reason", TEXT, pk=True)],
    }


INDEXES = [("runs_owner", "runs", ["owner", "created_at"]),
           ("judge_checks_by_judge", "judge_checks", ["fingerprint", "created_at"]),
           ("run_keeping_visitor", "run_keeping", ["visitor"])]


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    existing = set(inspector.get_table_names())
    for name, columns in _tables().items():
        if name not in existing:
            op.create_table(name, *columns)
            continue
        # a database of an earlier release: add the columns added since it was made (all have defaults)
        have = {c["name"] for c in inspector.get_columns(name)}
        for column in columns:
            if column.name not in have:
                op.add_column(name, column)
    for name, table, columns in INDEXES:
        have = {i["name"] for i in inspector.get_indexes(table)} if table in existing else set()
        if name not in have:
            op.create_index(name, table, columns)


def downgrade() -> None:
    for name in reversed(list(_tables())):
        op.drop_table(name)
