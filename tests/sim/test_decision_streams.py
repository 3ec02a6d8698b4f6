"""Not one decision changes: seeded replays held to the decision streams recorded before the
core took its current shape (``decision_streams.py``; the commit is in
``fixtures/streams/cases.json``), hash for hash.

The cases cover every queue order and every placement at least once, and every pair of
(queue order, mode, quotas, preemption, budgets) at least once; the last test checks that
the fixture still does.

The FGD and frag-balance cases were recorded again when FGD's ties came to go to the tightest
node and frag-balance came to charge contended GPU models (docs/fgd.md): those 7 cases and no
other changed.

The two Philly-slice cases were recorded again, alone, when trace durations came to be read on
the trace's own hardware (``suanli.core.speed``): the slices replay on ``6x8xV100``, not on
Philly's K80s and P40s, so each job now runs ``duration × 0.4484 / 1.0`` (the GPU-weighted
speed of Philly's machines over the V100's) where it ran ``duration / 1.0`` before, and the
shorter jobs move the decisions. Under the reference basis (V100 = 1.0, as before) they are
still the streams first recorded, which the test below holds.

Case 40 (``placement/topology``) was added with that placement, recorded at its commit; no
other case changed.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

import decision_streams
from decision_streams import FIXTURES, PREEMPTION, Case, run_case
from suanli.core.registry import names
from support import trace_dir_or_skip

RECORDED = json.loads((FIXTURES / "cases.json").read_text())
CASES: list[dict[str, Any]] = RECORDED["cases"]


def trace_dir() -> Path:
    return trace_dir_or_skip()


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_decisions_are_the_recorded_ones(case: dict[str, Any]) -> None:
    c = Case.of(case)
    got = run_case(c, trace_dir() if c.trace is not None else None)
    assert got == case["expect"], f"{c.name}: decisions differ from {RECORDED['recorded_at']}"


BEFORE_NATIVE_TIME = {
    "38-philly-fifo": {
        "stream": "d4586329904cbe3917dc7e30f258a17345a22683da9e59a72a1c4ce4314e7c47",
        "decisions": 944,
        "cycles": 963,
        "outcome": "9f2da2e304df057fbafa8bf3f633f3dfc76b9e2ef72b1dd42aaa97531e051f10",
        "finished": 500,
        "preemptions": 0,
        "budget_verdicts": 0,
    },
    "39-philly-drf-easy-fgd": {
        "stream": "65270b9bd0393d743f4adb0669115798fbf23012c2da44054d4d812ab6114cb2",
        "decisions": 2032,
        "cycles": 959,
        "outcome": "2aaeeca4601b8a7b2c45a050ea714681ceb0d3e5f7a3608bd6eb0f573fe051fa",
        "finished": 500,
        "preemptions": 0,
        "budget_verdicts": 0,
    },
}
"""The Philly slices' digests as first recorded, when trace durations were read at V100 = 1.0
(the FGD case's recorded again at that basis when FGD's ties came to go to the tightest
node: the change meant to move FGD's decisions, and only those)."""


@pytest.mark.parametrize("name", sorted(BEFORE_NATIVE_TIME))
def test_philly_slices_moved_only_by_their_speed_basis(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from suanli.core.speed import REFERENCE

    (case,) = [c for c in CASES if c["name"] == name]
    real = decision_streams.trace_jobs
    monkeypatch.setattr(
        decision_streams, "trace_jobs", lambda spec, root: (real(spec, root)[0], REFERENCE)
    )
    assert run_case(Case.of(case), trace_dir()) == BEFORE_NATIVE_TIME[name]


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


NEWER_ORDERS = {"qssf", "las", "srtf", "sjf-gpu"}
"""Queue orders added after the streams were recorded: they have no recorded stream to keep,
and their own tests (tests/core/test_predictive_orders.py) hold their decisions."""


def test_the_cases_cover_every_order_placement_and_pair() -> None:
    rows = [factors(c) for c in CASES if "trace" not in c]
    orders = set(names("queue")) - NEWER_ORDERS
    assert NEWER_ORDERS <= set(names("queue"))
    assert {r["queue"] for r in rows} == orders
    assert {r["placement"] for r in rows} == set(names("placement"))
    values = {
        "queue": orders,
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
