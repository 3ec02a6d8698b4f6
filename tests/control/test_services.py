"""``ServiceKeeper`` over a real store and a fake clock: the demand history at a fixed step,
what the autoscaler is asked, and the back-off after replicas fail (no processes: the
replica jobs' states are written directly, as the loop would)."""

from __future__ import annotations

from suanli.control.services import ServiceKeeper, ServiceRequest, replica_spec
from suanli.store import Store
from suanli.store import jobs as js
from suanli.store import services as ss

T0 = 1_764_000_000.0
STEP = 10.0


def create(store: Store, **over: object) -> ss.ServiceRecord:
    body = {"name": "web", "replica": {"command": ["serve"]}, "mu": 10.0, "slo": 0.6,
            "min_replicas": 1, "max_replicas": 8, "autoscaler": "reactive",
            "autoscaler_options": {"stabilise": 30}, **over}  # fmt: skip
    req = ServiceRequest.model_validate(body)
    spec = replica_spec(req, "vision", "vision").model_dump(mode="json")
    data = {"request": req.model_dump(mode="json"), "replica": spec}
    return ss.create_service(store, tenant="vision", name="web", user="ana", spec=data,
                             now_ms=round(T0 * 1000))  # fmt: skip


def live(store: Store, sid: int) -> list[js.JobRecord]:
    return ss.replicas(store, [sid])


def test_steps_hold_the_mean_of_their_reports_and_the_rate_before_them(store: Store) -> None:
    svc = create(store)
    k = ServiceKeeper(store, step_s=STEP)
    k.tick(T0)
    t = k.tracked[svc.id]
    assert t.desired == 1 and len(live(store, svc.id)) == 1  # no demand: the minimum
    ss.add_demand(store, svc.id, 20.0, 0)
    ss.add_demand(store, svc.id, 30.0, 0)
    k.tick(T0 + 5)  # inside the first step: nothing closed yet
    assert t.rates == [] and t.desired == 1
    k.tick(T0 + 10)
    assert t.rates == [25.0]  # the mean of the step's reports
    assert t.desired == 4 and len(live(store, svc.id)) == 4
    k.tick(T0 + 35)  # two more steps without reports: the rate holds
    assert t.rates == [25.0, 25.0, 25.0]
    ss.add_demand(store, svc.id, 0.0, 0)
    k.tick(T0 + 40)
    assert t.rates[-1] == 0.0
    assert t.desired == 4  # the reactive window (30 s) still remembers 25/s
    k.tick(T0 + 80)
    assert t.desired == 1  # past it: down to the minimum, never below
    jobs = live(store, svc.id)
    assert len(jobs) == 1 and jobs[0].seq == min(j.seq for j in ss.replicas(store, live=False))


def test_failed_replicas_are_replaced_after_a_growing_back_off(store: Store) -> None:
    svc = create(store, autoscaler="fixed", autoscaler_options={"replicas": 2})
    k = ServiceKeeper(store, step_s=STEP)
    k.tick(T0)
    first = live(store, svc.id)
    assert len(first) == 2
    js.set_job_state(store, first[0].id, "failed", 0, reason="exit 1")
    k.tick(T0 + 1)
    assert len(live(store, svc.id)) == 1  # held: 5 s after the first failure
    k.tick(T0 + 6.5)
    again = live(store, svc.id)
    assert len(again) == 2
    newest = max(again, key=lambda j: j.seq)
    js.set_job_state(store, newest.id, "failed", 0, reason="exit 1")
    k.tick(T0 + 7)
    k.tick(T0 + 15)
    assert len(live(store, svc.id)) == 1  # the second in a row: 10 s
    k.tick(T0 + 17.5)
    assert len(live(store, svc.id)) == 2


def test_a_deleted_service_is_forgotten_and_gets_no_replicas(store: Store) -> None:
    svc = create(store)
    k = ServiceKeeper(store, step_s=STEP)
    k.tick(T0)
    ss.delete_service(store, svc.id, 0, "ana")
    k.tick(T0 + 10)
    assert k.tracked == {} and ss.replicas(store) == []


def test_folded_reports_are_pruned_to_each_services_latest(store: Store) -> None:
    svc = create(store)
    k = ServiceKeeper(store, step_s=STEP)
    for rate in (1.0, 2.0, 3.0):
        ss.add_demand(store, svc.id, rate, 0)
    k.tick(T0)  # a first pass starts after what is there; it keeps only the latest
    assert [r.rate for r in ss.demand_after(store, 0)] == [3.0]
    for rate in (20.0, 30.0):
        ss.add_demand(store, svc.id, rate, 0)
    k.tick(T0 + 5)
    t = k.tracked[svc.id]
    assert t.bucket == [20.0, 30.0]  # folded into the open step
    assert [r.rate for r in ss.demand_after(store, 0)] == [30.0]
    assert ss.latest_demand(store, [svc.id])[svc.id].rate == 30.0
    k.tick(T0 + 10)
    assert t.rates == [25.0]  # nothing folded was lost to the pruning
    assert ss.prune_demand(store, k.last_report) == 0  # a service's latest is kept
    ss.add_demand(store, svc.id, 40.0, 0)
    ss.add_demand(store, svc.id, 50.0, 0)
    # Pruning up to what was folded leaves what was not, though a later report exists.
    assert ss.prune_demand(store, k.last_report) == 1
    assert [r.rate for r in ss.demand_after(store, 0)] == [40.0, 50.0]
    k.tick(T0 + 11)
    assert t.bucket == [40.0, 50.0]
    assert [r.rate for r in ss.demand_after(store, 0)] == [50.0]
