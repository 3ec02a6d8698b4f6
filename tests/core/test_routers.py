"""The routers (``router/<name>``, ``suanli.core.routing``): each picks as its rule says,
none ever picks a member that may not take the job, and every decision explains itself."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suanli.core.registry import create
from suanli.core.routing import Candidate, RouteRequest

JOB = RouteRequest("j1", gpus=8)
ROUTERS = ("first-admit", "least-loaded", "cheapest", "suanli")


def cand(member: str, order: int, **kw: object) -> Candidate:
    base = {"admits_now": False, "load": 0.5, "start_s": 3600.0, "run_s": 3600.0,
            "price_hour": 10.0, "list_price_hour": 10.0}  # fmt: skip
    base.update(kw)
    return Candidate(member, order, **base)  # type: ignore[arg-type]


def route(name: str, *cands: Candidate, **options: object):  # type: ignore[no-untyped-def]
    return create("router", name, **options).route(JOB, cands)


def test_first_admit_takes_the_first_that_admits_now_else_the_first_eligible() -> None:
    a, b, c = cand("a", 0), cand("b", 1, admits_now=True), cand("c", 2, admits_now=True)
    assert route("first-admit", c, b, a).member == "b"
    assert route("first-admit", a, replace(b, admits_now=False)).member == "a"
    r = route("first-admit", replace(a, excluded="down"), replace(b, admits_now=False))
    assert r.member == "b" and "waits at the first eligible" in r.why


def test_least_loaded_and_cheapest() -> None:
    a, b = cand("a", 0, load=0.9, price_hour=5.0), cand("b", 1, load=0.2, price_hour=8.0)
    assert route("least-loaded", a, b).member == "b"
    assert route("cheapest", a, b).member == "a"  # neither admits now: the cheapest
    assert route("cheapest", a, replace(b, admits_now=True)).member == "b"  # capacity first


def test_suanli_weighs_finish_and_cost() -> None:
    # b starts 5 h sooner for $10 more: five hours are worth $50 at $10 an hour.
    a = cand("a", 0, start_s=6 * 3600.0, price_hour=10.0)
    b = cand("b", 1, start_s=3600.0, price_hour=20.0)
    r = route("suanli", a, b, time_weight=1.0)
    assert r.member == "b"
    (sb, sa) = r.scores
    assert sb.total == pytest.approx(20 + 10 * 2) and sa.total == pytest.approx(10 + 10 * 7)
    parts = dict(sb.parts)
    assert parts["wait h"] == 1 and parts["compute $"] == 20 and parts["time $"] == 20
    # With data to move to b for 5 h and $100, a wins.
    r = route("suanli", a, replace(b, start_s=6 * 3600.0, move_s=5 * 3600.0, move_cost=100.0),
              time_weight=1.0)  # fmt: skip
    assert r.member == "a"
    assert "routed to a by suanli" in r.explain() and "b: score" in r.explain()
    # Where an hour weighs a tenth of $10, a's $10 cheaper compute outweighs 5 h.
    assert route("suanli", a, b, time_weight=0.1).member == "a"
    with pytest.raises(ValueError, match="time_weight"):
        create("router", "suanli", time_weight=-1)


@pytest.mark.parametrize("name", ROUTERS)
@pytest.mark.parametrize("why", ["down", "data residency: eu only", "budget: $12 > $10"])
def test_an_excluded_member_is_never_chosen(name: str, why: str) -> None:
    best = cand("best", 0, admits_now=True, load=0.0, price_hour=1.0, start_s=0.0)
    other = cand("other", 1, load=0.9, price_hour=50.0)
    r = route(name, replace(best, excluded=why), other)
    assert r.member == "other"
    assert ("best", why) in r.excluded and why in r.explain()
    none = route(name, replace(best, excluded=why))
    assert none.member is None and why in none.why and none.scores == ()


candidates = st.lists(
    st.builds(
        cand,
        st.sampled_from(["a", "b", "c", "d"]),
        st.integers(0, 3),
        excluded=st.sampled_from(["", "", "down", "budget"]),
        admits_now=st.booleans(),
        load=st.floats(0, 2),
        start_s=st.floats(0, 1e6),
        run_s=st.floats(1, 1e6),
        price_hour=st.floats(0, 100),
        list_price_hour=st.floats(0.01, 100),
        move_s=st.floats(0, 1e4),
        move_cost=st.floats(0, 1e3),
    ),
    max_size=6,
    unique_by=lambda c: c.member,
)


@settings(max_examples=200, deadline=None)
@given(candidates, st.sampled_from(ROUTERS))
def test_every_router_picks_an_eligible_member_or_none_and_ranks_all(cands, name) -> None:  # type: ignore[no-untyped-def]
    r = route(name, *cands)
    ok = {c.member for c in cands if not c.excluded}
    assert (r.member is None) == (not ok)
    if r.member is not None:
        assert r.member in ok and r.scores[0].member == r.member
    assert {s.member for s in r.scores} == ok
    assert {m for m, _ in r.excluded} == {c.member for c in cands if c.excluded}
    assert r.as_dict()["member"] == r.member
