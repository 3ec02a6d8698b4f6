"""Online services: each service's spec, the demand its tenant reports, and its replicas.

Revision ID: 0006
Revises: 0005

Written by hand; ``suanli/store/schema.py`` describes the same tables (a test checks that
they agree). ``services`` holds one row per service of a tenant (its name unique within the
tenant) with the replica count the autoscaler last asked for; ``service_demand`` the request
rates reported for it, in arrival order (the scheduler loop folds them into its fixed-step
history); ``jobs.service_id`` names the service a replica job runs for (NULL for every other
job), indexed, so that a service's live replicas are one indexed read.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None


def _row_id() -> sa.types.TypeEngine[int]:
    # SQLite auto-numbers only a column declared exactly INTEGER PRIMARY KEY.
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "services",
        sa.Column("id", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("user_name", sa.Text, nullable=False),
        sa.Column("spec", sa.Text, nullable=False),
        sa.Column("desired", sa.Integer, nullable=True),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_services"),
        sa.UniqueConstraint("tenant", "name", name="uq_services_tenant_name"),
        sa.CheckConstraint("desired IS NULL OR desired >= 0", name="ck_services_desired"),
    )
    op.create_table(
        "service_demand",
        sa.Column("id", _row_id(), primary_key=True, autoincrement=True),
        sa.Column("service_id", sa.BigInteger, nullable=False),
        sa.Column("at_ms", sa.BigInteger, nullable=False),
        sa.Column("rate", sa.Float, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_service_demand"),
        sa.ForeignKeyConstraint(
            ["service_id"], ["services.id"], name="fk_service_demand_service_id_services"
        ),
        sa.CheckConstraint("rate >= 0", name="ck_service_demand_rate"),
    )
    op.create_index("ix_service_demand_service_id", "service_demand", ["service_id"])
    op.add_column("jobs", sa.Column("service_id", sa.BigInteger, nullable=True))
    op.create_index("ix_jobs_service_id", "jobs", ["service_id"])


def downgrade() -> None:
    op.drop_index("ix_jobs_service_id", table_name="jobs")
    with op.batch_alter_table("jobs") as t:
        t.drop_column("service_id")
    op.drop_index("ix_service_demand_service_id", table_name="service_demand")
    op.drop_table("service_demand")
    op.drop_table("services")
