"""The live control plane: API tokens, jobs and their events, attempts, GPUs and claims.

Revision ID: 0003
Revises: 0002

Written by hand; ``suanli/store/schema.py`` describes the same tables (a test checks that
they agree).

The guard against double allocation is in the database, not only in the scheduler: every
GPU of the inventory is a row of ``gpus`` whose ``used_milli`` (milli-GPU claimed, 0..1000)
has a CHECK constraint, and triggers on ``gpu_claims`` add a claim's share to its GPU when
it is inserted and take it off when it is deleted. A claim that would take a GPU past a
whole one therefore fails, whatever code inserts it, and the transaction rolls back.

``job_events`` is append-only, like the ledger (UPDATE, DELETE and, on PostgreSQL, TRUNCATE
refused; on PostgreSQL through ``suanli_refuse_change()`` of ``0001``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

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
ROLES = ("admin", "tenant-admin", "user")


def _row_id() -> sa.types.TypeEngine[int]:
    # SQLite auto-numbers only a column declared exactly INTEGER PRIMARY KEY.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("token_hash", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("tenant", sa.Text, nullable=True),
        sa.Column("user_name", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("revoked_ms", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_api_tokens_token_hash"),
        sa.CheckConstraint(_in("role", ROLES), name="ck_api_tokens_role"),
        sa.CheckConstraint(
            "(role = 'admin') OR (tenant IS NOT NULL)", name="ck_api_tokens_tenant_bound"
        ),
    )
    op.create_table(
        "jobs",
        sa.Column("seq", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("id", sa.Text, nullable=False),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("user_name", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("queue", sa.Text, nullable=False),
        sa.Column("priority_class", sa.Text, nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("cancel_requested", sa.Boolean, nullable=False),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("submitted_ms", sa.BigInteger, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_jobs"),
        sa.UniqueConstraint("id", name="uq_jobs_id"),
        sa.CheckConstraint(_in("state", JOB_STATES), name="ck_jobs_state"),
    )
    op.create_index("ix_jobs_tenant_seq", "jobs", ["tenant", "seq"])
    op.create_index("ix_jobs_state", "jobs", ["state"])
    op.create_table(
        "job_events",
        sa.Column("id", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Text, nullable=False),
        sa.Column("at_ms", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_job_events"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_job_events_job_id_jobs"),
    )
    op.create_index("ix_job_events_job_id", "job_events", ["job_id"])
    op.create_table(
        "attempts",
        sa.Column("id", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Text, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("placement", sa.Text, nullable=False),
        sa.Column("handles", sa.Text, nullable=True),
        sa.Column("admitted_ms", sa.BigInteger, nullable=False),
        sa.Column("started_ms", sa.BigInteger, nullable=True),
        sa.Column("ended_ms", sa.BigInteger, nullable=True),
        sa.Column("outcome", sa.Text, nullable=True),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("detail", sa.Text, nullable=True),
        sa.Column("metered", sa.Boolean, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_attempts"),
        sa.UniqueConstraint("job_id", "attempt", name="uq_attempts_job_id_attempt"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_attempts_job_id_jobs"),
        sa.CheckConstraint(
            _in("state", ("admitted", "running", "stopping", "ended")), name="ck_attempts_state"
        ),
    )
    op.create_index("ix_attempts_state", "attempts", ["state"])
    op.create_table(
        "nodes",
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("gpu_model", sa.Text, nullable=True),
        sa.Column("gpu_memory_mib", sa.BigInteger, nullable=False),
        sa.Column("cpu_milli", sa.BigInteger, nullable=False),
        sa.Column("memory_mib", sa.BigInteger, nullable=False),
        sa.Column("healthy", sa.Boolean, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_nodes"),
    )
    op.create_table(
        "gpus",
        sa.Column("node", sa.Text, nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("uuid", sa.Text, nullable=False),
        sa.Column("memory_mib", sa.BigInteger, nullable=False),
        sa.Column("used_milli", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("node", "idx", name="pk_gpus"),
        sa.ForeignKeyConstraint(["node"], ["nodes.name"], name="fk_gpus_node_nodes"),
        sa.CheckConstraint("used_milli >= 0 AND used_milli <= 1000", name="ck_gpus_share"),
    )
    op.create_table(
        "gpu_claims",
        sa.Column("id", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Text, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("task", sa.Integer, nullable=False),
        sa.Column("node", sa.Text, nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        sa.Column("milli", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_gpu_claims"),
        sa.UniqueConstraint(
            "job_id",
            "attempt",
            "task",
            "node",
            "idx",
            name="uq_gpu_claims_job_id_attempt_task_node_idx",
        ),
        sa.ForeignKeyConstraint(
            ["node", "idx"], ["gpus.node", "gpus.idx"], name="fk_gpu_claims_node_gpus"
        ),
        sa.ForeignKeyConstraint(
            ["job_id", "attempt"],
            ["attempts.job_id", "attempts.attempt"],
            name="fk_gpu_claims_job_id_attempts",
        ),
        sa.CheckConstraint("milli > 0 AND milli <= 1000", name="ck_gpu_claims_milli"),
    )
    op.create_index("ix_gpu_claims_job_id", "gpu_claims", ["job_id"])

    _triggers()


_CLAIMS_SQLITE = (
    "CREATE TRIGGER gpu_claims_take AFTER INSERT ON gpu_claims BEGIN "
    "UPDATE gpus SET used_milli = used_milli + NEW.milli "
    "WHERE node = NEW.node AND idx = NEW.idx; END",
    "CREATE TRIGGER gpu_claims_give AFTER DELETE ON gpu_claims BEGIN "
    "UPDATE gpus SET used_milli = used_milli - OLD.milli "
    "WHERE node = OLD.node AND idx = OLD.idx; END",
    "CREATE TRIGGER gpu_claims_no_update BEFORE UPDATE ON gpu_claims BEGIN "
    "SELECT RAISE(ABORT, 'gpu_claims rows are never updated: delete and insert'); END",
)

_CLAIMS_POSTGRESQL = (
    """
    CREATE FUNCTION suanli_account_claim() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            UPDATE gpus SET used_milli = used_milli + NEW.milli
            WHERE node = NEW.node AND idx = NEW.idx;
            RETURN NEW;
        END IF;
        UPDATE gpus SET used_milli = used_milli - OLD.milli
        WHERE node = OLD.node AND idx = OLD.idx;
        RETURN OLD;
    END
    $$
    """,
    "CREATE TRIGGER gpu_claims_account AFTER INSERT OR DELETE ON gpu_claims "
    "FOR EACH ROW EXECUTE FUNCTION suanli_account_claim()",
    "CREATE TRIGGER gpu_claims_no_update BEFORE UPDATE ON gpu_claims "
    "FOR EACH ROW EXECUTE FUNCTION suanli_refuse_change()",
)


def _triggers() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for statement in _CLAIMS_POSTGRESQL if postgres else _CLAIMS_SQLITE:
        op.execute(statement)
    # job_events is append-only, as the ledger.
    if postgres:
        op.execute(
            "CREATE TRIGGER job_events_append_only BEFORE UPDATE OR DELETE ON job_events "
            "FOR EACH ROW EXECUTE FUNCTION suanli_refuse_change()"
        )
        op.execute(
            "CREATE TRIGGER job_events_no_truncate BEFORE TRUNCATE ON job_events "
            "FOR EACH STATEMENT EXECUTE FUNCTION suanli_refuse_change()"
        )
    else:
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER job_events_no_{action.lower()} BEFORE {action} ON job_events "
                f"BEGIN SELECT RAISE(ABORT, 'job_events is append-only: {action} refused'); END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER gpu_claims_account ON gpu_claims")
        op.execute("DROP TRIGGER gpu_claims_no_update ON gpu_claims")
        op.execute("DROP FUNCTION suanli_account_claim()")
        op.execute("DROP TRIGGER job_events_append_only ON job_events")
        op.execute("DROP TRIGGER job_events_no_truncate ON job_events")
    else:
        for name in ("gpu_claims_take", "gpu_claims_give", "gpu_claims_no_update"):
            op.execute(f"DROP TRIGGER {name}")
        for action in ("update", "delete"):
            op.execute(f"DROP TRIGGER job_events_no_{action}")
    op.drop_index("ix_gpu_claims_job_id", table_name="gpu_claims")
    op.drop_table("gpu_claims")
    op.drop_table("gpus")
    op.drop_table("nodes")
    op.drop_index("ix_attempts_state", table_name="attempts")
    op.drop_table("attempts")
    op.drop_index("ix_job_events_job_id", table_name="job_events")
    op.drop_table("job_events")
    op.drop_index("ix_jobs_state", table_name="jobs")
    op.drop_index("ix_jobs_tenant_seq", table_name="jobs")
    op.drop_table("jobs")
    op.drop_table("api_tokens")
