"""The ``metrics`` role: a scraper's token, which reads ``/metrics`` for every tenant and
nothing else, and like an admin's has no tenant.

Revision ID: 0004
Revises: 0003

Written by hand; ``suanli/store/schema.py`` describes the same tables (a test checks that
they agree). SQLite cannot alter a CHECK constraint, so the table is rebuilt there (Alembic's
batch mode); PostgreSQL alters it in place.
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: tuple[str, ...] | None = None
depends_on: tuple[str, ...] | None = None

OLD_ROLES = "role IN ('admin', 'tenant-admin', 'user')"
NEW_ROLES = "role IN ('admin', 'tenant-admin', 'user', 'metrics')"
OLD_BOUND = "(role = 'admin') OR (tenant IS NOT NULL)"
NEW_BOUND = "(role IN ('admin', 'metrics')) OR (tenant IS NOT NULL)"


def _swap(roles: str, bound: str) -> None:
    with op.batch_alter_table("api_tokens", recreate="auto") as t:
        t.drop_constraint("ck_api_tokens_role", type_="check")
        t.drop_constraint("ck_api_tokens_tenant_bound", type_="check")
        t.create_check_constraint("ck_api_tokens_role", roles)
        t.create_check_constraint("ck_api_tokens_tenant_bound", bound)


def upgrade() -> None:
    _swap(NEW_ROLES, NEW_BOUND)


def downgrade() -> None:
    op.execute("DELETE FROM api_tokens WHERE role = 'metrics'")
    _swap(OLD_ROLES, OLD_BOUND)
