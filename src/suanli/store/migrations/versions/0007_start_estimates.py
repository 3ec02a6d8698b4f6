"""Start-time estimates: when each pending job is expected to start, as the scheduler loop
last planned it.

Revision ID: 0007
Revises: 0006

Written by hand; ``suanli/store/schema.py`` describes the same columns (a test checks that
they agree). ``jobs.start_p50_ms`` and ``jobs.start_p90_ms`` are the range of the estimate
(``suanli.core.starts.Estimate``: epoch milliseconds; NULL while none was made, or for a job
no healthy node could ever hold), ``jobs.start_planned_ms`` when the plan it came from was
made.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

COLUMNS = ("start_p50_ms", "start_p90_ms", "start_planned_ms")


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column("jobs", sa.Column(name, sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as t:
        for name in reversed(COLUMNS):
            t.drop_column(name)
