"""The tables of the store, as SQLAlchemy Core metadata.

This module describes the schema at the newest migration. It is not how tables are created:
the hand-written Alembic migrations under ``migrations/versions`` are. A test compares the
two, so a change here without a migration (or the other way round) fails the test run.

All tables are append-only: rows are inserted, never updated or deleted. The migrations
add triggers that make the database refuse ``UPDATE`` and ``DELETE`` (and, on
PostgreSQL, ``TRUNCATE``) on them, so the guarantee does not rest on the API alone.

Units (see ``suanli.metering``): times are UTC epoch milliseconds; usage quantities are the
record's integers (milli-GPU, milli-cores, MiB, MB); money is integer micro-units of the
currency (``amount × 10**6``) and quantities in priced units are integer nano-units
(``quantity × 10**9``), so that sums are exact on every backend.
"""

from __future__ import annotations

import sqlalchemy as sa

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Constraint names are derived, identical on SQLite and PostgreSQL, and stable across
migrations (the migrations spell the same names)."""

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

# A 64-bit surrogate key. SQLite only auto-numbers a column declared exactly
# ``INTEGER PRIMARY KEY`` (an alias of its 64-bit rowid), hence the variant.
RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

ENTRY_KINDS = ("charge", "reversal", "settlement")

usage_records = sa.Table(
    "usage_records",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    # Unique per (job, attempt, interval): recording a record twice inserts it once.
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("start_ms", sa.BigInteger, nullable=False),
    sa.Column("end_ms", sa.BigInteger, nullable=False),
    sa.Column("org", sa.Text, nullable=False),
    sa.Column("queue", sa.Text, nullable=False),
    sa.Column("priority_class", sa.Text, nullable=False),
    sa.Column("cluster", sa.Text, nullable=False),
    sa.Column("cpu_milli", sa.BigInteger, nullable=False),
    sa.Column("memory_mib", sa.BigInteger, nullable=False),
    sa.Column("storage_mb", sa.BigInteger, nullable=False),
    sa.Column("network_mb", sa.BigInteger, nullable=False),
    sa.Column("gpu_util", sa.Float, nullable=True),
    sa.UniqueConstraint("key"),
    sa.Index(None, "start_ms"),
)

usage_gpus = sa.Table(
    "usage_gpus",
    metadata,
    # One row per (GPU model, milli-GPU) pair of a record, in the record's order
    # (``position``), so that GPU time can be summed per model in SQL.
    sa.Column("record_key", sa.Text, sa.ForeignKey("usage_records.key"), nullable=False),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("gpu_model", sa.Text, nullable=False),
    sa.Column("milli", sa.BigInteger, nullable=False),
    sa.PrimaryKeyConstraint("record_key", "position"),
    sa.Index(None, "gpu_model"),
)

ledger_entries = sa.Table(
    "ledger_entries",
    metadata,
    # Append order; ``entries`` and ``journal`` read rows back in this order.
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    # The entry's own key: unique, so posting an entry twice inserts it once.
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    # The charge key this entry nets into: for a charge posted from rating, its own key; for
    # a reversal, that of the entry it reverses; for a corrected charge posted by
    # ``reconcile(fix=True)``, the expected charge's key.
    sa.Column("charge_key", sa.Text, nullable=False),
    # The entry a reversal reverses (NULL for charges). Unique, so an entry is reversed at
    # most once (NULLs never collide on SQLite or PostgreSQL).
    sa.Column("reverses", sa.Text, sa.ForeignKey("ledger_entries.key"), nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("batch", sa.Text, nullable=False),
    sa.Column("record_key", sa.Text, nullable=False),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("org", sa.Text, nullable=False),
    sa.Column("queue", sa.Text, nullable=False),
    sa.Column("priority_class", sa.Text, nullable=False),
    sa.Column("cluster", sa.Text, nullable=False),
    sa.Column("resource", sa.Text, nullable=False),
    sa.Column("gpu_model", sa.Text, nullable=False),
    sa.Column("band", sa.Text, nullable=False),
    sa.Column("start_ms", sa.BigInteger, nullable=False),
    sa.Column("end_ms", sa.BigInteger, nullable=False),
    sa.Column("raw", sa.BigInteger, nullable=False),
    sa.Column("quantity_nano", sa.BigInteger, nullable=False),
    # The rate as a decimal string: any precision, read back exactly; never summed.
    sa.Column("rate", sa.Text, nullable=False),
    sa.Column("amount_micro", sa.BigInteger, nullable=False),
    sa.Column("currency", sa.Text, nullable=False),
    sa.Column("book_version", sa.Text, nullable=False),
    sa.Column("waste", sa.Boolean, nullable=False),
    sa.UniqueConstraint("key"),
    sa.UniqueConstraint("reverses"),
    # A settlement (migration 0009) credits the region that provided a cross-region use;
    # like a charge, it reverses nothing.
    sa.CheckConstraint("kind IN ('charge', 'reversal', 'settlement')", name="kind"),
    sa.CheckConstraint(
        "(kind IN ('charge', 'settlement') AND reverses IS NULL) "
        "OR (kind = 'reversal' AND reverses IS NOT NULL)",
        name="reversal_has_target",
    ),
    sa.Index(None, "start_ms"),
)

BUDGET_KINDS = ("set", "remove")

budgets = sa.Table(
    "budgets",
    metadata,
    # One row per version of a budget (migration 0002), appended by ``suanli.store.budgets``:
    # setting a budget again appends a new version, removing it appends a ``remove`` row (a
    # tombstone whose spec columns are NULL). The set in effect at an instant is, per label,
    # the version with the greatest ``(effective_ms, id)`` not after it, unless a tombstone.
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    # ``BudgetSpec.label``: the name, else the org, else ``*``. Versions of a label count
    # 1, 2, ... (unique, so two writers cannot append the same version).
    sa.Column("label", sa.Text, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=True),
    sa.Column("org", sa.Text, nullable=True),
    sa.Column("period", sa.Text, nullable=True),
    # The limit as a decimal string: exact at any precision; never summed in SQL.
    sa.Column("limit_amount", sa.Text, nullable=True),
    sa.Column("currency", sa.Text, nullable=True),
    # Fractions of the limit, comma-separated, each as Python's shortest round-trip repr.
    sa.Column("thresholds", sa.Text, nullable=True),
    sa.Column("action", sa.Text, nullable=True),
    sa.Column("demote_to", sa.Text, nullable=True),
    # A fixed period's span, UTC POSIX seconds (NULL for calendar periods).
    sa.Column("period_start", sa.BigInteger, nullable=True),
    sa.Column("period_end", sa.BigInteger, nullable=True),
    # When the version takes effect (UTC epoch ms), as given by the caller.
    sa.Column("effective_ms", sa.BigInteger, nullable=False),
    sa.Column("set_by", sa.Text, nullable=True),
    sa.UniqueConstraint("label", "version"),
    sa.CheckConstraint("kind IN ('set', 'remove')", name="kind"),
    sa.CheckConstraint(
        "(kind = 'remove') OR (org IS NOT NULL AND period IS NOT NULL "
        "AND limit_amount IS NOT NULL AND currency IS NOT NULL)",
        name="set_has_spec",
    ),
    sa.Index(None, "effective_ms"),
)


# --- the live control plane (migration 0003) ---------------------------------------------

JOB_STATES = (
    "pending",
    "admitted",
    "running",
    "succeeded",
    "failed",
    "cancelled",
    "preempted",
    "lost",
)
"""A job's states: ``pending`` (queued; also after a preemption or a lost attempt, when it
is requeued), ``admitted`` (placed, its GPUs claimed, its tasks being started), ``running``,
and the final ``succeeded``, ``failed``, ``cancelled``, ``preempted`` (evicted and not to be
requeued) and ``lost``."""
ATTEMPT_STATES = ("admitted", "running", "stopping", "ended")
ROLES = ("admin", "tenant-admin", "user", "metrics")

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    # SHA-256 of the token (hex): the token itself is shown once, when it is made.
    sa.Column("token_hash", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("role", sa.Text, nullable=False),
    # The tenant the token acts for; NULL only for an admin and a metrics scraper (every
    # tenant).
    sa.Column("tenant", sa.Text, nullable=True),
    sa.Column("user_name", sa.Text, nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("revoked_ms", sa.BigInteger, nullable=True),
    sa.UniqueConstraint("token_hash"),
    sa.CheckConstraint("role IN ('admin', 'tenant-admin', 'user', 'metrics')", name="role"),
    sa.CheckConstraint(
        "(role IN ('admin', 'metrics')) OR (tenant IS NOT NULL)", name="tenant_bound"
    ),
)

jobs = sa.Table(
    "jobs",
    metadata,
    # Submission order; ``id`` is what users see.
    sa.Column("seq", RowId, primary_key=True, autoincrement=True),
    sa.Column("id", sa.Text, nullable=False),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("user_name", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("queue", sa.Text, nullable=False),
    sa.Column("priority_class", sa.Text, nullable=False),
    # The validated job spec, as JSON (``suanli.control.spec.JobSpec``).
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    # Why it is pending, or how it ended (one line).
    sa.Column("reason", sa.Text, nullable=True),
    # Attempts started so far (the current one's number while admitted or running).
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("cancel_requested", sa.Boolean, nullable=False),
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("submitted_ms", sa.BigInteger, nullable=False),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
    # The service a replica job runs for (``services.id``, migration 0006); NULL otherwise.
    sa.Column("service_id", sa.BigInteger, nullable=True),
    # When a pending job is expected to start (``suanli.core.starts``, migration 0007): the
    # estimate's P50 and P90, and when its plan was made; NULL while none was made.
    sa.Column("start_p50_ms", sa.BigInteger, nullable=True),
    sa.Column("start_p90_ms", sa.BigInteger, nullable=True),
    sa.Column("start_planned_ms", sa.BigInteger, nullable=True),
    sa.UniqueConstraint("id"),
    sa.CheckConstraint(
        "state IN ('pending', 'admitted', 'running', 'succeeded', 'failed', 'cancelled', "
        "'preempted', 'lost')",
        name="state",
    ),
    sa.Index(None, "tenant", "seq"),
    sa.Index(None, "state"),
    sa.Index(None, "service_id"),
)

job_events = sa.Table(
    "job_events",
    metadata,
    # A job's history, append-only: submitted, admitted, started, preempted, ended, ...
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("at_ms", sa.BigInteger, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
    sa.ForeignKeyConstraint(["job_id"], ["jobs.id"]),
    sa.Index(None, "job_id"),
)

attempts = sa.Table(
    "attempts",
    metadata,
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    # Where its tasks run (JSON: per task, node and GPU indices and share).
    sa.Column("placement", sa.Text, nullable=False),
    # The backend's handles of its tasks (JSON), once started: enough to adopt them again.
    sa.Column("handles", sa.Text, nullable=True),
    sa.Column("admitted_ms", sa.BigInteger, nullable=False),
    sa.Column("started_ms", sa.BigInteger, nullable=True),
    sa.Column("ended_ms", sa.BigInteger, nullable=True),
    sa.Column("outcome", sa.Text, nullable=True),
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("detail", sa.Text, nullable=True),
    # Whether its usage record and charges are in the ledger.
    sa.Column("metered", sa.Boolean, nullable=False),
    sa.UniqueConstraint("job_id", "attempt"),
    sa.ForeignKeyConstraint(["job_id"], ["jobs.id"]),
    sa.CheckConstraint("state IN ('admitted', 'running', 'stopping', 'ended')", name="state"),
    sa.Index(None, "state"),
)

nodes = sa.Table(
    "nodes",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("gpus", sa.Integer, nullable=False),
    sa.Column("gpu_model", sa.Text, nullable=True),
    sa.Column("gpu_memory_mib", sa.BigInteger, nullable=False),
    sa.Column("cpu_milli", sa.BigInteger, nullable=False),
    sa.Column("memory_mib", sa.BigInteger, nullable=False),
    sa.Column("healthy", sa.Boolean, nullable=False),
    # ``nvml`` or ``declared``.
    sa.Column("source", sa.Text, nullable=False),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
    # An operator's hold (migration 0008): ``cordon`` (nothing new lands here) or ``drain``
    # (and what runs here is requeued); NULL: in service.
    sa.Column("cordon", sa.Text, nullable=True),
    sa.Column("cordon_reason", sa.Text, nullable=True),
    sa.Column("cordon_ms", sa.BigInteger, nullable=True),
)

gpus = sa.Table(
    "gpus",
    metadata,
    sa.Column("node", sa.Text, nullable=False),
    sa.Column("idx", sa.Integer, nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("uuid", sa.Text, nullable=False),
    sa.Column("memory_mib", sa.BigInteger, nullable=False),
    # Milli-GPU claimed, kept by triggers on gpu_claims; the CHECK refuses more than one GPU.
    sa.Column("used_milli", sa.Integer, nullable=False),
    # The GPU's health watch (migration 0008): False while it finds a fault (``fault``: what,
    # ``fault_ms``: since when); the scheduler keeps the GPU out of service meanwhile.
    sa.Column("healthy", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("fault", sa.Text, nullable=True),
    sa.Column("fault_ms", sa.BigInteger, nullable=True),
    sa.PrimaryKeyConstraint("node", "idx"),
    sa.ForeignKeyConstraint(["node"], ["nodes.name"]),
    sa.CheckConstraint("used_milli >= 0 AND used_milli <= 1000", name="share"),
)

gpu_claims = sa.Table(
    "gpu_claims",
    metadata,
    # One row per (attempt, task, GPU) while the attempt holds it; deleted on release.
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("task", sa.Integer, nullable=False),
    sa.Column("node", sa.Text, nullable=False),
    sa.Column("idx", sa.Integer, nullable=False),
    sa.Column("milli", sa.Integer, nullable=False),
    sa.UniqueConstraint("job_id", "attempt", "task", "node", "idx"),
    sa.ForeignKeyConstraint(["node", "idx"], ["gpus.node", "gpus.idx"]),
    sa.ForeignKeyConstraint(["job_id", "attempt"], ["attempts.job_id", "attempts.attempt"]),
    sa.CheckConstraint("milli > 0 AND milli <= 1000", name="milli"),
    sa.Index(None, "job_id"),
)


# --- GPU utilisation samples (migration 0005) ----------------------------------------------

gpu_samples = sa.Table(
    "gpu_samples",
    metadata,
    # One reading of one GPU an attempt holds, by ``suanli.control.sampler``; raw samples
    # are kept for the retention period (and under a row cap), then folded into
    # ``gpu_util_summaries`` and deleted.
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("node", sa.Text, nullable=False),
    sa.Column("gpu", sa.Integer, nullable=False),
    # When it was read, and the time it stands for (since the attempt's previous reading of
    # this GPU, at most twice the sampling interval): the weight of a time-weighted mean.
    sa.Column("at_ms", sa.BigInteger, nullable=False),
    sa.Column("span_ms", sa.BigInteger, nullable=False),
    # Utilisation of what the attempt holds on this GPU, in basis points (10000 = 100 %),
    # an integer so that sums are exact; GPU memory its processes use, in MiB.
    sa.Column("util_bp", sa.Integer, nullable=False),
    sa.Column("memory_mib", sa.BigInteger, nullable=False),
    sa.ForeignKeyConstraint(["job_id", "attempt"], ["attempts.job_id", "attempts.attempt"]),
    sa.CheckConstraint("util_bp >= 0 AND util_bp <= 10000", name="util"),
    sa.CheckConstraint("span_ms > 0 AND memory_mib >= 0", name="figures"),
    sa.Index(None, "job_id", "attempt"),
    sa.Index(None, "at_ms"),
)

gpu_util_summaries = sa.Table(
    "gpu_util_summaries",
    metadata,
    # What folded raw samples of an attempt leave behind: exact sums, so that the mean and
    # the peak read the same before and after the raw rows are dropped.
    sa.Column("job_id", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("samples", sa.BigInteger, nullable=False),
    sa.Column("span_ms", sa.BigInteger, nullable=False),
    # Sum of util_bp x span_ms: the time-weighted mean is util_bp_ms / span_ms.
    sa.Column("util_bp_ms", sa.BigInteger, nullable=False),
    sa.Column("memory_max_mib", sa.BigInteger, nullable=False),
    sa.Column("first_ms", sa.BigInteger, nullable=False),
    sa.Column("last_ms", sa.BigInteger, nullable=False),
    sa.PrimaryKeyConstraint("job_id", "attempt"),
    sa.ForeignKeyConstraint(["job_id", "attempt"], ["attempts.job_id", "attempts.attempt"]),
)

# --- online services (migration 0006) -------------------------------------------------------

services = sa.Table(
    "services",
    metadata,
    # One online service of a tenant (``suanli.store.services``): its validated spec (JSON)
    # and the replica count its autoscaler last asked for (NULL: not sized yet).
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("user_name", sa.Text, nullable=False),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("desired", sa.Integer, nullable=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
    sa.UniqueConstraint("tenant", "name"),
    sa.CheckConstraint("desired IS NULL OR desired >= 0", name="desired"),
)

service_demand = sa.Table(
    "service_demand",
    metadata,
    # A request rate (per second) reported for a service, in arrival order; the scheduler
    # loop reads the rows after the last one it saw and folds them into fixed steps.
    sa.Column("id", RowId, primary_key=True, autoincrement=True),
    sa.Column("service_id", sa.BigInteger, sa.ForeignKey("services.id"), nullable=False),
    sa.Column("at_ms", sa.BigInteger, nullable=False),
    sa.Column("rate", sa.Float, nullable=False),
    sa.CheckConstraint("rate >= 0", name="rate"),
    sa.Index(None, "service_id"),
)

# --- data sets held here (migration 0010) ----------------------------------------------------

dataset_copies = sa.Table(
    "dataset_copies",
    metadata,
    # A copy of a data set this member holds (``present``) or is being sent (``arriving``,
    # expected at ``arrives_ms``, from ``source``): what it tells a federation front
    # (``suanli.store.datasets``, ``docs/network.md`` "A live member", item 6).
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("size_gb", sa.Float, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("arrives_ms", sa.BigInteger, nullable=True),
    sa.Column("source", sa.Text, nullable=True),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
    sa.Column("updated_by", sa.Text, nullable=False),
    sa.CheckConstraint("size_gb >= 0", name="size_gb"),
    sa.CheckConstraint("state IN ('present', 'arriving')", name="state"),
    sa.CheckConstraint("state = 'present' OR arrives_ms IS NOT NULL", name="arrives"),
)

APPEND_ONLY_TABLES = ("usage_records", "usage_gpus", "ledger_entries", "budgets", "job_events")
"""Tables on which the database refuses UPDATE, DELETE and TRUNCATE."""
