"""GPU utilisation samples in the store, on SQLite and PostgreSQL: migration 0005, the
database's own checks, reading samples back, and the bill's GPU time from usage records.

The samples here are written directly (the sampler's side, with a stand-in for NVML, is in
``tests/control/test_sampler.py``).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
import sqlalchemy as sa
from alembic import command

from pg import location_fixture, postgres_server, store_fixture  # noqa: F401  (postgres_server: a fixture)
from suanli.metering.usage import Attempt, usage_records
from suanli.store import Store, record_usage
from suanli.store import db as store_db
from suanli.store import jobs as js
from suanli.store import utilisation as su
from suanli.store.schema import gpu_samples

NOW = 1_764_000_000_000
HOUR = 3_600_000

store = store_fixture()
db_location = location_fixture()


def running_attempt(store: Store, tenant: str = "vision", gpus: list[int] | None = None) -> str:
    if not js.list_nodes(store):
        js.sync_inventory(
            store,
            [js.NodeRow("n0", 2, "H100", 81920, 96000, 1 << 20, True, "nvml")],
            [js.GpuRow("n0", i, "H100", f"GPU-{i}", 81920) for i in range(2)],
            NOW,
        )
    job = js.submit_job(
        store, spec={"command": ["true"]}, tenant=tenant, user="ana", name="j", queue=tenant,
        priority_class="normal", now_ms=NOW,
    )  # fmt: skip
    place = [{"task": 0, "node": "n0", "gpus": gpus or [], "gpu_milli": 1000,
              "gpu_memory_mib": 0, "cpu_milli": 1000, "memory_mib": 1024}]  # fmt: skip
    with store.begin() as conn:
        js.admit_attempt(conn, job.id, 1, place, NOW)
        js.attempt_started(conn, job.id, 1, [], NOW)
    return job.id


def test_migration_0005_goes_up_over_a_store_at_0004_and_down_again(db_location: str) -> None:
    engine = store_db.create_store_engine(db_location)
    try:
        cfg = store_db.alembic_config(engine)
        command.upgrade(cfg, "0004")
        assert not {"gpu_samples", "gpu_util_summaries"} & set(sa.inspect(engine).get_table_names())
        assert store_db.upgrade(engine) == store_db.head_revision()
        inspector = sa.inspect(engine)
        assert {"gpu_samples", "gpu_util_summaries"} <= set(inspector.get_table_names())
        indexes = {ix["name"]: ix["column_names"] for ix in inspector.get_indexes("gpu_samples")}
        assert indexes == {
            "ix_gpu_samples_job_id_attempt": ["job_id", "attempt"],  # per-job reads
            "ix_gpu_samples_at_ms": ["at_ms"],  # retention
        }
        command.downgrade(cfg, "0004")
        assert store_db.current_revision(engine) == "0004"
        assert not {"gpu_samples", "gpu_util_summaries"} & set(sa.inspect(engine).get_table_names())
        assert store_db.upgrade(engine) == store_db.head_revision()
    finally:
        engine.dispose()


def test_the_database_refuses_impossible_samples(store: Store) -> None:
    job = running_attempt(store, gpus=[0])
    row = {"job_id": job, "attempt": 1, "node": "n0", "gpu": 0, "at_ms": NOW, "span_ms": 1000,
           "util_bp": 10_000, "memory_mib": 0}  # fmt: skip
    with store.begin() as conn:
        conn.execute(sa.insert(gpu_samples), [row])  # 100 %: fine
    for bad in ({"util_bp": 10_001}, {"util_bp": -1}, {"span_ms": 0}, {"memory_mib": -1},
                {"attempt": 2}):  # fmt: skip
        with pytest.raises(sa.exc.IntegrityError), store.begin() as conn:
            conn.execute(sa.insert(gpu_samples), [{**row, **bad}])


def test_samples_read_back_per_attempt_with_an_exact_time_weighted_mean(store: Store) -> None:
    job = running_attempt(store, gpus=[0, 1])
    other = running_attempt(store, tenant="nlp", gpus=[])
    samples = [
        su.Sample(job, 1, "n0", 0, NOW + 1000, 1000, 2500, 100),
        su.Sample(job, 1, "n0", 1, NOW + 1000, 1000, 7500, 300),
        su.Sample(job, 1, "n0", 0, NOW + 4000, 3000, 10_000, 200),  # 3 s at 100 %
    ]
    assert su.record_samples(store, samples) == {(job, 1)}
    u = su.job_utilisation(store, job)[1]
    assert (u.samples, u.span_ms, u.memory_max_mib) == (3, 5000, 300)
    # (25 % x 1 s + 75 % x 1 s + 100 % x 3 s) / 5 s
    assert u.exact == Fraction(2500 + 7500 + 3 * 10_000, 5 * 10_000) == Fraction(4, 5)
    assert u.ratio == 0.8
    assert (u.first_ms, u.last_ms) == (NOW + 1000, NOW + 4000)
    assert su.job_utilisation(store, other) == {}
    assert [s.at_ms for s in su.raw_samples(store, job, 1)] == [NOW + 1000] * 2 + [NOW + 4000]
    live = su.sampled_attempts(store)
    assert [(a.job_id, a.tenant, a.queue) for a in live] == [(job, "vision", "vision"),
                                                            (other, "nlp", "nlp")]  # fmt: skip


def test_the_bill_splits_allocated_gpu_time_into_used_idle_and_unmeasured(store: Store) -> None:
    a = running_attempt(store, gpus=[0])
    b = running_attempt(store, gpus=[1])
    c = running_attempt(store, tenant="nlp", gpus=[])

    def meter(job: str, org: str, milli: int, hours: float, util: float | None) -> None:
        att = Attempt(job, 1, NOW, NOW + round(hours * HOUR), org, org.split("/")[0], "normal",
                      "local", (("H100", milli),), gpu_util=util)  # fmt: skip
        record_usage(store, usage_records([att], HOUR))

    meter(a, "vision/ana", 1000, 2, 0.25)  # 2 GPU-h, a quarter used
    meter(b, "vision/bo", 500, 1, None)  # half a GPU for an hour, never sampled
    meter(c, "nlp/li", 2000, 1.5, 1.0)
    report = su.gpu_time(store, ["department", "resource", "band"])
    assert report.by == ["department"]  # charge-only dimensions left out
    g = 1000 * HOUR  # milli-GPU x ms in a GPU-hour
    vision, nlp = report.groups[("vision",)], report.groups[("nlp",)]
    assert (vision.allocated, vision.used, vision.idle, vision.unmeasured) == (
        2 * g + g // 2, g // 2, 3 * g // 2, g // 2,
    )  # fmt: skip
    assert (nlp.allocated, nlp.used, nlp.idle, nlp.unmeasured) == (3 * g, 3 * g, 0, 0)
    assert report.unmeasured == {(b, 1): g // 2}
    assert su.unmeasured_by_attempt(report) == [(b, 1, g // 2)]
    mine = su.gpu_time(store, ["user", "day", "gpu_model"], tenant="nlp")
    assert list(mine.groups) == [("nlp/li", "2025-11-24", "H100")] and mine.unmeasured == {}
    later = su.gpu_time(store, ["job_id"], since_ms=NOW + HOUR)  # records cut at the hour
    assert {k[0] for k in later.groups} == {a, c}
