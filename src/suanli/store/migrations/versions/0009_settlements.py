"""Ledger settlements: a new entry kind, ``settlement``, the credit to the region that provided
a cross-region use (``suanli.federation.settle``).

Revision ID: 0009
Revises: 0008

Written by hand; ``suanli/store/schema.py`` describes the same table (a test checks that
they agree). The two CHECK constraints on ``kind`` admit ``settlement`` (with no entry it
reverses, as a charge). PostgreSQL alters them in place. SQLite cannot alter a CHECK
constraint: the table is rebuilt (renamed, created anew, every row copied in order, the old
one dropped), then its index and its append-only triggers are made again. A downgrade is
refused while any settlement is in the ledger: the ledger is append-only, so they cannot be
removed, and the old constraint would refuse them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

KINDS = "kind IN ('charge', 'reversal', 'settlement')"
TARGET = ("(kind IN ('charge', 'settlement') AND reverses IS NULL) "
          "OR (kind = 'reversal' AND reverses IS NOT NULL)")  # fmt: skip
OLD_KINDS = "kind IN ('charge', 'reversal')"
OLD_TARGET = ("(kind = 'charge' AND reverses IS NULL) "
              "OR (kind = 'reversal' AND reverses IS NOT NULL)")  # fmt: skip


def _row_id() -> sa.types.TypeEngine[int]:
    # SQLite auto-numbers only a column declared exactly INTEGER PRIMARY KEY.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _columns() -> list[sa.Column[object]]:
    text = ("key", "kind", "charge_key")
    out: list[sa.Column[object]] = [sa.Column("id", _row_id(), primary_key=True, autoincrement=True)]
    out += [sa.Column(n, sa.Text, nullable=False) for n in text]
    out += [sa.Column("reverses", sa.Text, nullable=True), sa.Column("reason", sa.Text, nullable=True),
            sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
            sa.Column("batch", sa.Text, nullable=False), sa.Column("record_key", sa.Text, nullable=False),
            sa.Column("job_id", sa.Text, nullable=False), sa.Column("attempt", sa.Integer, nullable=False)]
    out += [sa.Column(n, sa.Text, nullable=False)
            for n in ("org", "queue", "priority_class", "cluster", "resource", "gpu_model", "band")]
    out += [sa.Column(n, sa.BigInteger, nullable=False)
            for n in ("start_ms", "end_ms", "raw", "quantity_nano")]
    out += [sa.Column("rate", sa.Text, nullable=False), sa.Column("amount_micro", sa.BigInteger, nullable=False),
            sa.Column("currency", sa.Text, nullable=False), sa.Column("book_version", sa.Text, nullable=False),
            sa.Column("waste", sa.Boolean, nullable=False)]
    return out  # fmt: skip


def _sqlite_rebuild(kinds: str, target: str) -> None:
    op.execute("ALTER TABLE ledger_entries RENAME TO ledger_entries_old")
    op.create_table(
        "ledger_entries",
        *_columns(),
        sa.PrimaryKeyConstraint("id", name="pk_ledger_entries"),
        sa.UniqueConstraint("key", name="uq_ledger_entries_key"),
        sa.UniqueConstraint("reverses", name="uq_ledger_entries_reverses"),
        sa.ForeignKeyConstraint(["reverses"], ["ledger_entries.key"],
                                name="fk_ledger_entries_reverses_ledger_entries"),  # fmt: skip
        sa.CheckConstraint(kinds, name="ck_ledger_entries_kind"),
        sa.CheckConstraint(target, name="ck_ledger_entries_reversal_has_target"),
    )
    names = ", ".join(c.name for c in _columns())
    op.execute(f"INSERT INTO ledger_entries ({names}) SELECT {names} FROM ledger_entries_old "
               "ORDER BY id")  # fmt: skip
    op.execute("DROP TABLE ledger_entries_old")  # its index and triggers go with it
    op.create_index("ix_ledger_entries_start_ms", "ledger_entries", ["start_ms"])
    for action in ("UPDATE", "DELETE"):
        op.execute(
            f"CREATE TRIGGER ledger_entries_no_{action.lower()} BEFORE {action} ON ledger_entries "
            f"BEGIN SELECT RAISE(ABORT, 'ledger_entries is append-only: {action} refused'); END"
        )


def _swap(kinds: str, target: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        # The names 0001 gave them, the naming convention applied to them ("ck_" + table).
        for name, sql in (("ck_ledger_entries_ck_ledger_entries_kind", kinds),
                          ("ck_ledger_entries_ck_ledger_entries_reversal_has_target", target)):  # fmt: skip
            op.execute(f"ALTER TABLE ledger_entries DROP CONSTRAINT {name}")
            op.execute(f"ALTER TABLE ledger_entries ADD CONSTRAINT {name} CHECK ({sql})")
    else:
        _sqlite_rebuild(kinds, target)


def upgrade() -> None:
    _swap(KINDS, TARGET)


def downgrade() -> None:
    held = op.get_bind().execute(
        sa.text("SELECT COUNT(*) FROM ledger_entries WHERE kind = 'settlement'")
    ).scalar_one()
    if held:
        raise RuntimeError(
            f"the ledger holds {held} settlement entries: the ledger is append-only, so "
            "revision 0008, which has no settlements, cannot be restored"
        )
    _swap(OLD_KINDS, OLD_TARGET)
