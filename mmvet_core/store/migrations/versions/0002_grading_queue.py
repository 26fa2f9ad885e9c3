"""Grading workers and shared rate limits: the grading queue (runs a process grades, or a worker may take, with
their leases) and each judge account's pace (the mirror of the server's rate-limit buckets, shared by every
process calling that account).

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-05
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TEXT = sa.TEXT()
REAL = sa.REAL().with_variant(postgresql.DOUBLE_PRECISION(), "postgresql")
INTEGER = sa.INTEGER().with_variant(sa.BIGINT(), "postgresql")
ZERO = sa.text("0")


def upgrade() -> None:
    op.create_table(
        "grading_queue",
        sa.Column("run_id", TEXT, primary_key=True),
        sa.Column("endpoint", TEXT, nullable=False),
        sa.Column("claimable", INTEGER, nullable=False, server_default=ZERO),
        sa.Column("holder", TEXT),
        sa.Column("lease_until", REAL),
        sa.Column("visitor", TEXT, nullable=False, server_default=""),
        sa.Column("work", TEXT, nullable=False),
        sa.Column("stop", INTEGER, nullable=False, server_default=ZERO),
        sa.Column("claims", INTEGER, nullable=False, server_default=ZERO),
        sa.Column("waiting_until", REAL),
        sa.Column("enqueued_at", REAL, nullable=False),
        sa.Column("claimed_at", REAL),
    )
    op.create_index("grading_queue_claim", "grading_queue", ["claimable", "enqueued_at"])
    op.create_table(
        "judge_pace",
        sa.Column("account", TEXT, primary_key=True),
        sa.Column("state", TEXT, nullable=False),
        sa.Column("paused_until", REAL, nullable=False, server_default=ZERO),
        sa.Column("updated_at", REAL, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("judge_pace")
    op.drop_index("grading_queue_claim", "grading_queue")
    op.drop_table("grading_queue")
