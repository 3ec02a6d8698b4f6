"""Not one decision changes: seeded replays held to the decision streams recorded before the
core took its current shape (``decision_streams.py``; the commit is in
``fixtures/streams/cases.json``), hash for hash.

The cases cover every queue order and every placement at least once, and every pair of
(queue order, mode, quotas, preemption, budgets) at least once; the last test checks that
the fixture still does.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from decision_streams import FIXTURES, PREEMPTION, Case, run_case
from suanli.core.registry import names
from suanli.traces.errors import TraceNotFoundError
from suanli.traces.locate import find_trace_dir

RECORDED = json.loads((FIXTURES / "cases.json").read_text())
CASES: list[dict[str, Any]] = RECORDED["cases"]


def trace_dir() -> Path:
    try:
        return find_trace_dir()
    except TraceNotFoundError as e:
        places = ", ".join(str(p) for _, p in e.places)
        pytest.skip(f"public traces not found in {places}: set SUANLI_TRACE_DIR")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_decisions_are_the_recorded_ones(case: dict[str, Any]) -> None:
    c = Case.of(case)
    got = run_case(c, trace_dir() if c.trace is not None else None)
    assert got == case["expect"], f"{c.name}: decisions differ from {RECORDED['recorded_at']}"


def factors(case: dict[str, Any]) -> dict[str, str]:
    queue_mode, placement = case["policy"].split("+")
    queue, _, mode = queue_mode.partition("/")
    quotas = case.get("quotas")
    return {
        "queue": queue,
        "mode": mode or "skip",
        "quotas": quotas.rsplit("-", 1)[1].removesuffix(".yaml") if quotas else "none",
        "preemption": case.get("preemption", "off"),
        "budgets": "yes" if case.get("budgets") else "no",
        "placement": placement,
    }


def test_the_cases_cover_every_order_placement_and_pair() -> None:
    rows = [factors(c) for c in CASES if "trace" not in c]
    assert {r["queue"] for r in rows} == set(names("queue"))
    assert {r["placement"] for r in rows} == set(names("placement"))
    values = {
        "queue": set(names("queue")),
        "mode": {"skip", "strict", "easy", "easy-oracle", "conservative", "conservative-oracle"},
        "quotas": {"none", "static", "shared", "cohorts"},
        "preemption": set(PREEMPTION),
        "budgets": {"no", "yes"},
    }
    for a, b in combinations(values, 2):
        seen = {(r[a], r[b]) for r in rows}
        missing = {(x, y) for x in values[a] for y in values[b]} - seen
        assert not missing, f"no case has ({a}, {b}) in {sorted(missing)}"
    assert any(c.get("cycle_interval") for c in CASES)
    assert any("trace" in c for c in CASES)
