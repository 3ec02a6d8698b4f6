"""Hardware health: GPUs out of service on a health fault, nodes cordoned or drained by an
operator.

Revision ID: 0008
Revises: 0007

Written by hand; ``suanli/store/schema.py`` describes the same columns (a test checks that
they agree). ``gpus.healthy`` is False while the GPU's health watch finds a fault
(``gpus.fault`` says which, ``gpus.fault_ms`` since when); ``nodes.cordon`` is ``cordon``
(nothing new lands there; what runs there runs on) or ``drain`` (and its attempts are
requeued from their checkpoints), NULL for a node in service, with ``cordon_reason`` and
``cordon_ms``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None


def upgrade() -> None:
    # Plain ADD COLUMNs: a batch (table recreated) would break the claim triggers on ``gpus``
    # under SQLite. ``nodes.cordon``'s values are checked by ``suanli.store.nodes``.
    op.add_column(
        "gpus", sa.Column("healthy", sa.Boolean, nullable=False, server_default=sa.true())
    )
    op.add_column("gpus", sa.Column("fault", sa.Text, nullable=True))
    op.add_column("gpus", sa.Column("fault_ms", sa.BigInteger, nullable=True))
    for name, kind in (
        ("cordon", sa.Text),
        ("cordon_reason", sa.Text),
        ("cordon_ms", sa.BigInteger),
    ):
        op.add_column("nodes", sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("nodes") as t:
        for name in ("cordon_ms", "cordon_reason", "cordon"):
            t.drop_column(name)
    for name in ("fault_ms", "fault", "healthy"):
        op.drop_column("gpus", name)
