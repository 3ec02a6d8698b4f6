"""``benchmarks/bench_network_room.py``'s count on a federation small enough to work out by
hand: the GPU-hours each pool held are the jobs' own GPUs times their runtimes at the pool's
speed, and the room is what the cheaper pools left unused, valued at the difference of the
two prices of a reference hour of work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_network_room as room_bench  # noqa: E402

from suanli.config.cluster import load_cluster  # noqa: E402
from suanli.core.model import Job, TaskRequest  # noqa: E402
from suanli.federation.engine import federate  # noqa: E402
from suanli.federation.model import Federation, FedJob, Network, Region  # noqa: E402


def region(name: str, spec: str, price: float, site: tuple[float, float]) -> Region:
    cluster = load_cluster(spec)
    return Region(name, cluster, dict.fromkeys((m.name for m in cluster.gpu_models), price),
                  0.02, site, "us")  # fmt: skip


def test_held_hours_are_the_jobs_own_and_the_room_is_the_cheaper_pools_unused_hours() -> None:
    fed = Federation((region("v", "1x8xV100", 3.0, (38.9, -77.5)),
                      region("a", "1x8xA100", 4.0, (45.8, -119.7))), Network(), {})  # fmt: skip
    a100 = load_cluster("1x8xA100").gpu_models[0].speed
    assert a100 > 4.0 / 3.0  # an A100's reference hour is the cheaper one
    jobs = [FedJob(Job(f"j{i}", submit, 3600.0, TaskRequest(gpus=4), tenant="t"), home="v")
            for i, submit in enumerate((0.0, 0.0, 60.0))]  # fmt: skip
    res = federate(fed, jobs, "cheapest")
    # The cheapest hour that could start now: the first two fill the V100s, and the third,
    # a minute later, takes the A100s.
    assert sorted(o.member for o in res.outcomes) == ["a", "v", "v"]
    rows = {r.region: r for r in room_bench.pools(res)}
    assert rows["v"].held_h == pytest.approx(2 * 4 * 1.0)
    assert rows["a"].held_h == pytest.approx(4 * 1.0 / a100)
    assert rows["a"].ref_price == pytest.approx(4.0 / a100)
    span_h = res.horizon / 3600.0
    assert span_h == pytest.approx(1.0)  # the V100 jobs end last
    main_pool, saving = room_bench.room(list(rows.values()), span_h)
    assert main_pool is rows["v"]
    unused = 8 * 1.0 - 4 / a100
    assert rows["a"].unused_h == pytest.approx(unused)
    assert saving == pytest.approx(unused * a100 * (3.0 - 4.0 / a100))
    assert rows["v"].saves == 0.0  # the pool that did most of the work saves nothing


def test_only_pools_cheaper_than_the_main_one_count() -> None:
    rows = [
        room_bench.Pool("r", "V100", 10, 1.0, 3.0, held_h=50.0),  # the most work: 50
        room_bench.Pool("r", "A100", 4, 2.5, 4.0, held_h=10.0),  # $1.60 a reference hour
        room_bench.Pool("r", "P100", 10, 0.5, 2.0, held_h=0.0),  # $4.00: dearer, no room
    ]
    main_pool, saving = room_bench.room(rows, 10.0)
    assert main_pool is rows[0]
    assert rows[1].unused_h == pytest.approx(30.0)
    assert saving == pytest.approx(30.0 * 2.5 * (3.0 - 1.6))
    assert rows[2].saves == 0.0 and rows[2].unused_h == 0.0
