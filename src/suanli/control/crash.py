"""Crash points: where a test may kill the control plane with SIGKILL, by name.

``SUANLI_CRASH_AT=<point>`` (read once, when this module is imported) makes the process kill
itself with SIGKILL the first time it reaches ``crash_point(<point>)``;
``SUANLI_CRASH_AT=<point>:<n>`` the ``n``-th time. Nothing happens without the variable, and
a point costs one comparison. The chaos tests (``tests/cli/test_chaos.py``) and
``benchmarks/chaos.py`` kill ``suanli serve`` at each point and check, after a restart, that
nothing acknowledged is lost, no GPU is claimed twice and the ledger equals the attempts.

The points (``POINTS``), in the order a job meets them:
"""

from __future__ import annotations

import os
import signal

POINTS: dict[str, str] = {
    "submit-committed": "submissions committed, before the API answers them",
    "admit-written": "a decision written (GPU shares claimed), before any launch",
    "launch-partial": "one task of a gang launched, before the next",
    "launch-unrecorded": "every task launched, before the launch is recorded",
    "preempt-grace": "a preemption written and its stop signal sent, during the grace period",
    "cancel-sent": "a cancel's stop signal sent, before the attempt has ended",
    "exit-unrecorded": "an attempt's last task exited, before its end is written",
    "meter-inside": "inside the metering transaction, before it commits",
    "reconcile-partial": "during reconciliation, after its first repair",
    "recover-adopted": "during recovery, after the running tasks are adopted",
}
__doc__ = (__doc__ or "") + "".join(f"\n- ``{k}``: {v}" for k, v in POINTS.items()) + "\n"


def _parse(value: str | None) -> tuple[str | None, int]:
    if not value:
        return None, 0
    name, _, count = value.partition(":")
    if name not in POINTS:
        raise ValueError(
            f"SUANLI_CRASH_AT: unknown crash point {name!r} (known: {', '.join(POINTS)})"
        )
    return name, int(count) if count else 1


_AT, _LEFT = _parse(os.environ.get("SUANLI_CRASH_AT"))


def crash_point(name: str) -> None:
    """Kill this process with SIGKILL if ``SUANLI_CRASH_AT`` names ``name`` (see above)."""
    global _LEFT
    if name != _AT:
        return
    _LEFT -= 1
    if _LEFT <= 0:
        os.kill(os.getpid(), signal.SIGKILL)
