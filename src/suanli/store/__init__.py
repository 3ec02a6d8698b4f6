"""The store: SQLAlchemy tables (SQLite by default, PostgreSQL by URL), migrated by Alembic.

Layering: ``store`` sits above ``core`` and ``metering`` (it stores metering's usage records
and charges); nothing below it imports it. See ``docs/ledger.md``.
"""

from suanli.store.db import Store, StoreError, Target, open_store, upgrade
from suanli.store.ledger import (
    AlreadyReversedError,
    LedgerError,
    Total,
    UnknownEntryError,
    entries,
    gpu_time_by_model,
    journal,
    post_charges,
    post_settlements,
    provider,
    read_usage,
    record_usage,
    reverse,
    settlement_key,
    totals,
)
from suanli.store.reconcile import CurrencyTotals, Difference, ReconcileReport, reconcile
from suanli.store.rows import LedgerEntry, reversal_key

__all__ = [
    "AlreadyReversedError",
    "CurrencyTotals",
    "Difference",
    "LedgerEntry",
    "LedgerError",
    "ReconcileReport",
    "Store",
    "StoreError",
    "Target",
    "Total",
    "UnknownEntryError",
    "entries",
    "gpu_time_by_model",
    "journal",
    "open_store",
    "post_charges",
    "post_settlements",
    "provider",
    "read_usage",
    "reconcile",
    "record_usage",
    "reverse",
    "reversal_key",
    "settlement_key",
    "totals",
    "upgrade",
]
