"""API tokens: made once, stored hashed, each bound to a role and (but for admins) a tenant.

A token is ``sl_`` followed by 43 URL-safe characters (32 random bytes): unguessable, so a
plain SHA-256 of it is what the store keeps (a slow password hash buys nothing against a
256-bit secret, and every API request looks one up). The token itself is returned once, by
``create_token``, and never stored.

Roles: ``admin`` (every tenant, and the inventory and tokens), ``tenant-admin`` (every job
of its tenant; its tenant's tokens), ``user`` (its tenant's jobs; cancels only its own) and
``metrics`` (a Prometheus scraper's: ``/metrics`` of every tenant, and nothing else).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from suanli.store.db import Target, reading, writing
from suanli.store.schema import ROLES, api_tokens

TOKEN_PREFIX = "sl_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@/-]{0,199}$")


class TokenError(ValueError):
    """A token cannot be made or changed as asked (the message says why)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as: the token's id, name, role, tenant and user."""

    token_id: int
    name: str
    role: str
    tenant: str | None
    """None only for an admin."""
    user: str

    @property
    def admin(self) -> bool:
        return self.role == "admin"

    @property
    def scraper(self) -> bool:
        """A ``metrics`` token: reads every tenant's metrics, nothing else."""
        return self.role == "metrics"

    def sees(self, tenant: str) -> bool:
        """Whether this principal may see (and act on) ``tenant``'s jobs."""
        return self.admin or self.tenant == tenant

    def may_cancel(self, tenant: str, user: str) -> bool:
        """A user cancels its own jobs; a tenant admin any of its tenant's; an admin any."""
        if self.admin:
            return True
        if self.tenant != tenant:
            return False
        return self.role == "tenant-admin" or self.user == user


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A stored token, without its secret."""

    id: int
    name: str
    role: str
    tenant: str | None
    user: str
    created_ms: int
    revoked_ms: int | None


def hash_token(token: str) -> str:
    """The stored form of ``token``: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def _check_name(what: str, value: str) -> None:
    if not _NAME.match(value):
        raise TokenError(
            f"{what} {value!r}: 1-200 characters, letters, digits and ._@/- "
            "(starting with a letter or digit)"
        )


def create_token(
    target: Target,
    *,
    name: str,
    role: str,
    tenant: str | None,
    user: str,
    now_ms: int,
) -> tuple[str, TokenInfo]:
    """Make a token and store its hash; returns the token (shown once) and its record.
    ``TokenError`` for an unknown role, a non-admin without a tenant, or a bad name."""
    if role not in ROLES:
        raise TokenError(f"role {role!r}: choose from {', '.join(ROLES)}")
    if role in ("admin", "metrics"):
        if tenant is not None:
            raise TokenError(f"an {role} token acts for every tenant: give it no tenant")
    elif not tenant:
        raise TokenError(f"a {role} token needs a tenant")
    _check_name("name", name)
    _check_name("user", user)
    if tenant is not None:
        _check_name("tenant", tenant)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with writing(target) as conn:
        token_id = conn.execute(
            sa.insert(api_tokens)
            .values(
                token_hash=hash_token(token),
                name=name,
                role=role,
                tenant=tenant,
                user_name=user,
                created_ms=now_ms,
            )
            .returning(api_tokens.c.id)
        ).scalar_one()
    return token, TokenInfo(token_id, name, role, tenant, user, now_ms, None)


def authenticate(target: Target, token: str) -> Principal | None:
    """The principal of ``token``, or None if it is unknown, malformed or revoked."""
    if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    digest = hash_token(token)
    with reading(target) as conn:
        row = conn.execute(sa.select(api_tokens).where(api_tokens.c.token_hash == digest)).first()
    # The lookup is by an index on the hash; compare again in constant time regardless.
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        return None
    if row.revoked_ms is not None:
        return None
    return Principal(row.id, row.name, row.role, row.tenant, row.user_name)


def list_tokens(target: Target, tenant: str | None = None) -> list[TokenInfo]:
    """Stored tokens (all, or one tenant's), oldest first."""
    q = sa.select(api_tokens).order_by(api_tokens.c.id)
    if tenant is not None:
        q = q.where(api_tokens.c.tenant == tenant)
    with reading(target) as conn:
        return [
            TokenInfo(r.id, r.name, r.role, r.tenant, r.user_name, r.created_ms, r.revoked_ms)
            for r in conn.execute(q)
        ]


def revoke_token(target: Target, token_id: int, now_ms: int) -> bool:
    """Revoke token ``token_id``; False if there is none (or it was revoked already)."""
    with writing(target) as conn:
        n = conn.execute(
            sa.update(api_tokens)
            .where(api_tokens.c.id == token_id, api_tokens.c.revoked_ms.is_(None))
            .values(revoked_ms=now_ms)
        ).rowcount
    return bool(n)


class TokenCache:
    """``authenticate`` with the answers for known tokens kept ``ttl_s`` seconds.

    Every API request authenticates; this saves the store a read per request. A token
    revoked by this process is forgotten at once (``forget_all``); one revoked by another
    process sharing the database stops working within ``ttl_s``. Unknown tokens are not
    cached (each costs a lookup), and the cache holds at most ``max_entries``.
    """

    def __init__(
        self,
        target: Target,
        *,
        ttl_s: float = 2.0,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.target = target
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.clock = clock
        self._known: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def cached(self, token: str) -> Principal | None:
        """The principal of ``token`` if this cache knows it and it is fresh; None otherwise
        (then ``authenticate`` asks the store). Never touches the store."""
        with self._lock:
            hit = self._known.get(hash_token(token))
        return hit[1] if hit is not None and self.clock() < hit[0] else None

    def authenticate(self, token: str) -> Principal | None:
        who = self.cached(token)
        if who is not None:
            return who
        key = hash_token(token)
        now = self.clock()
        who = authenticate(self.target, token)
        with self._lock:
            if who is None:
                self._known.pop(key, None)
            else:
                if len(self._known) >= self.max_entries:
                    self._known.clear()
                self._known[key] = (now + self.ttl_s, who)
        return who

    def forget_all(self) -> None:
        with self._lock:
            self._known.clear()
