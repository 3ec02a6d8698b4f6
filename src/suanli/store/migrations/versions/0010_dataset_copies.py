"""Data sets held here: the copies a member holds or is being sent, for a federation front.

Revision ID: 0010
Revises: 0009

Written by hand; ``suanli/store/schema.py`` describes the same table (a test checks that they
agree). ``dataset_copies`` holds one row per data set this member has a copy of
(``present``) or is being sent one of (``arriving``, expected at ``arrives_ms``, from
``source``), with its size and who last wrote it (``suanli.store.datasets``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None


def upgrade() -> None:
    op.create_table(
        "dataset_copies",
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("size_gb", sa.Float, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("arrives_ms", sa.BigInteger, nullable=True),
        sa.Column("source", sa.Text, nullable=True),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
        sa.Column("updated_by", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_dataset_copies"),
        sa.CheckConstraint("size_gb >= 0", name="ck_dataset_copies_size_gb"),
        sa.CheckConstraint("state IN ('present', 'arriving')", name="ck_dataset_copies_state"),
        sa.CheckConstraint(
            "state = 'present' OR arrives_ms IS NOT NULL", name="ck_dataset_copies_arrives"
        ),
    )


def downgrade() -> None:
    op.drop_table("dataset_copies")
