"""How the CLI names a database and its errors in one-line messages."""

from __future__ import annotations

import sqlalchemy as sa


def masked(target: str) -> str:
    """A database target for messages: a URL without its password (a path as it is)."""
    if "://" not in target:
        return target
    try:
        return sa.make_url(target).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return target


def first_line(e: BaseException) -> str:
    """The first line of a database error (the driver's own message where there is one)."""
    text = str(getattr(e, "orig", None) or e).strip()
    return text.splitlines()[0] if text else type(e).__name__
