"""Judge checks that visitors cannot reach (issue 33): every check records who made it — this server with its own
key (``host``) or a visitor with their own key (``visitor``, with the visitor's owner hash, seen by that visitor
only); checks stored before keep ``""`` (made by anyone: unverified until the host runs them again, at no cost:
their answers are stored). And the one stored official-equivalent estimate per (check, graded answers) that the
card, ``/status``, the leaderboard and MCP all read.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TEXT = sa.TEXT()
REAL = sa.REAL().with_variant(postgresql.DOUBLE_PRECISION(), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("judge_checks") as batch:
        batch.add_column(sa.Column("scope", TEXT, nullable=False, server_default=""))
        batch.add_column(sa.Column("owner_hash", TEXT, nullable=False, server_default=""))
    op.create_table(
        "estimates",
        sa.Column("check_id", TEXT, primary_key=True),
        sa.Column("inputs", TEXT, primary_key=True),
        sa.Column("result", TEXT, nullable=False),
        sa.Column("created_at", REAL, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("estimates")
    with op.batch_alter_table("judge_checks") as batch:
        batch.drop_column("owner_hash")
        batch.drop_column("scope")
