"""Control-plane metrics: values as Prometheus parses them, gauges replaced (not left stale),
the cycle histogram, independent registries per instance, bounded label sets and the tenant
view of ``render(queues)``."""

from __future__ import annotations

import math
from collections.abc import Collection

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from suanli.control.metrics import CYCLE_BUCKETS, OTHER_QUEUE, ControlMetrics

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(m: ControlMetrics, queues: Collection[str] | None = None) -> Samples:
    """Every sample of the rendered text (``render(queues)``), by (sample name, labels)."""
    body, content_type = m.render(queues)
    assert content_type == CONTENT_TYPE_LATEST
    out: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def series(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def key(**labels: str) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def test_gpu_gauges() -> None:
    m = ControlMetrics()
    m.set_gpus({"H100": 16, "A100": 8}, {"H100": 10.5})
    s = scrape(m)
    assert series(s, "suanli_gpus") == {key(model="H100"): 16, key(model="A100"): 8}
    assert series(s, "suanli_gpus_allocated") == {
        key(model="H100"): 10.5,
        key(model="A100"): 0,
    }


def test_gpu_gauges_are_replaced() -> None:
    m = ControlMetrics()
    m.set_gpus({"H100": 16, "A100": 8}, {"H100": 4, "A100": 2})
    m.set_gpus({"H100": 8}, {"H100": 0.25})
    s = scrape(m)
    assert series(s, "suanli_gpus") == {key(model="H100"): 8}
    assert series(s, "suanli_gpus_allocated") == {key(model="H100"): 0.25}
    m.set_gpus({}, {})
    s = scrape(m)
    assert series(s, "suanli_gpus") == {}
    assert series(s, "suanli_gpus_allocated") == {}


def test_job_gauge_is_replaced() -> None:
    m = ControlMetrics()
    m.set_jobs({("running", "vision"): 3, ("pending", "vision"): 5, ("running", "nlp"): 1})
    assert series(scrape(m), "suanli_jobs") == {
        key(state="running", queue="vision"): 3,
        key(state="pending", queue="vision"): 5,
        key(state="running", queue="nlp"): 1,
    }
    m.set_jobs({("running", "vision"): 4, ("succeeded", "nlp"): 1})
    assert series(scrape(m), "suanli_jobs") == {
        key(state="running", queue="vision"): 4,
        key(state="succeeded", queue="nlp"): 1,
    }


def test_cycle_histogram() -> None:
    m = ControlMetrics()
    for seconds in (0.0005, 0.003, 0.003, 0.2, 7.0, 30.0):
        m.observe_cycle(seconds)
    s = scrape(m)
    buckets = {
        float(dict(labels)["le"]): v
        for labels, v in series(s, "suanli_scheduling_cycle_seconds_bucket").items()
    }
    assert sorted(buckets) == [*CYCLE_BUCKETS, math.inf]
    assert buckets[0.001] == 1
    assert buckets[0.0025] == 1
    assert buckets[0.005] == 3
    assert buckets[0.1] == 3
    assert buckets[0.25] == 4
    assert buckets[5.0] == 4
    assert buckets[10.0] == 5
    assert buckets[math.inf] == 6
    assert s[("suanli_scheduling_cycle_seconds_count", key())] == 6
    assert math.isclose(s[("suanli_scheduling_cycle_seconds_sum", key())], 37.2065)


def test_counters() -> None:
    m = ControlMetrics()
    m.admitted("vision")
    m.admitted("vision", 3)
    m.admitted("nlp")
    m.preempted("nlp", "reclaim")
    m.preempted("nlp", "reclaim", 2)
    m.preempted("vision", "priority")
    m.request("GET", "/jobs/{id}", 200)
    m.request("GET", "/jobs/{id}", 200)
    m.request("POST", "/jobs", "422")
    s = scrape(m)
    assert series(s, "suanli_admissions_total") == {key(queue="vision"): 4, key(queue="nlp"): 1}
    assert series(s, "suanli_preemptions_total") == {
        key(queue="nlp", reason="reclaim"): 3,
        key(queue="vision", reason="priority"): 1,
    }
    assert series(s, "suanli_api_requests_total") == {
        key(method="GET", route="/jobs/{id}", status="200"): 2,
        key(method="POST", route="/jobs", status="422"): 1,
    }


def test_render_is_text_exposition() -> None:
    m = ControlMetrics()
    m.set_gpus({"H200": 8}, {"H200": 1})
    body, content_type = m.render()
    assert content_type.startswith("text/plain")
    text = body.decode()
    assert "# TYPE suanli_gpus gauge" in text
    assert "# TYPE suanli_scheduling_cycle_seconds histogram" in text
    assert "# TYPE suanli_admissions_total counter" in text
    assert 'suanli_gpus{model="H200"} 8.0' in text
    assert "suanli_gpus_total" not in text  # _total is for counters only


def test_instances_are_independent() -> None:
    a, b = ControlMetrics(), ControlMetrics()
    a.set_gpus({"H100": 8}, {"H100": 8})
    a.admitted("q", 5)
    a.observe_cycle(0.01)
    b.set_gpus({"A100": 4}, {})
    b.admitted("q")
    sa, sb = scrape(a), scrape(b)
    assert series(sa, "suanli_gpus") == {key(model="H100"): 8}
    assert series(sb, "suanli_gpus") == {key(model="A100"): 4}
    assert series(sa, "suanli_admissions_total") == {key(queue="q"): 5}
    assert series(sb, "suanli_admissions_total") == {key(queue="q"): 1}
    assert sa[("suanli_scheduling_cycle_seconds_count", key())] == 1
    assert sb[("suanli_scheduling_cycle_seconds_count", key())] == 0
    # Nothing lands in the process-wide default registry.
    assert REGISTRY.get_sample_value("suanli_admissions_total", {"queue": "q"}) is None


def test_gpu_telemetry_gauges_are_replaced_and_skip_what_a_gpu_does_not_report() -> None:
    from suanli.backends.inventory import GpuSample

    m = ControlMetrics()
    m.set_gpu_samples(
        {
            ("n0", 0): GpuSample(87, 40_000, 412.5, 61),
            ("n0", 1): GpuSample(0, 512, None, None),
        }
    )
    s = scrape(m)
    assert series(s, "suanli_gpu_utilization_ratio") == {
        key(node="n0", gpu="0"): 0.87,
        key(node="n0", gpu="1"): 0.0,
    }
    assert series(s, "suanli_gpu_memory_used_bytes")[key(node="n0", gpu="0")] == 40_000 * 2**20
    assert series(s, "suanli_gpu_power_watts") == {key(node="n0", gpu="0"): 412.5}
    assert series(s, "suanli_gpu_temperature_celsius") == {key(node="n0", gpu="0"): 61}
    m.set_gpu_samples({("n0", 1): GpuSample(50, 1024, 100.0, 40)})  # GPU 0 gone
    s = scrape(m)
    assert series(s, "suanli_gpu_utilization_ratio") == {key(node="n0", gpu="1"): 0.5}
    assert series(s, "suanli_gpu_power_watts") == {key(node="n0", gpu="1"): 100.0}
    m.set_gpu_samples({})
    assert series(scrape(m), "suanli_gpu_memory_used_bytes") == {}


def populated(queues: list[str] | None = None) -> ControlMetrics:
    """Every metric with samples: two tenants' queues and the platform's own series."""
    m = ControlMetrics(queues)
    m.set_gpus({"H100": 8}, {"H100": 2.5})
    m.set_jobs({("running", "vision"): 2, ("pending", "nlp"): 1, ("pending", "stranger"): 4})
    m.admitted("vision", 2)
    m.admitted("nlp")
    m.admitted("stranger")
    m.preempted("nlp", "reclaim")
    m.preempted("stranger", "priority")
    m.request("GET", "/v1/jobs", 200)
    m.observe_cycle(0.02)
    return m


def queue_labels(samples: Samples) -> set[str]:
    return {v for (_, labels) in samples for k, v in labels if k == "queue"}


def test_unknown_queues_fold_into_other_with_a_quota_file() -> None:
    m = populated(["vision", "nlp"])
    s = scrape(m)
    assert series(s, "suanli_jobs") == {
        key(state="running", queue="vision"): 2,
        key(state="pending", queue="nlp"): 1,
        key(state="pending", queue=OTHER_QUEUE): 4,
    }
    assert series(s, "suanli_admissions_total") == {
        key(queue="vision"): 2,
        key(queue="nlp"): 1,
        key(queue=OTHER_QUEUE): 1,
    }
    assert series(s, "suanli_preemptions_total") == {
        key(queue="nlp", reason="reclaim"): 1,
        key(queue=OTHER_QUEUE, reason="priority"): 1,
    }
    assert m.queues == {"vision", "nlp"}


def test_folded_queues_are_summed_in_the_job_gauge() -> None:
    m = ControlMetrics(["a"])
    m.set_jobs({("pending", "a"): 1, ("pending", "x"): 2, ("pending", "y"): 3})
    assert series(scrape(m), "suanli_jobs") == {
        key(state="pending", queue="a"): 1,
        key(state="pending", queue=OTHER_QUEUE): 5,
    }
    m.set_jobs({("pending", "a"): 1})  # the folded series goes when nothing is folded
    assert series(scrape(m), "suanli_jobs") == {key(state="pending", queue="a"): 1}


def test_a_thousand_user_chosen_queues_make_at_most_max_queues_plus_one_labels() -> None:
    m = ControlMetrics(max_queues=10)
    names = [f"q{i}" for i in range(1000)]
    m.set_jobs({("pending", q): 1 for q in names})
    for q in names:
        m.admitted(q)
        m.preempted(q, "priority")
    s = scrape(m)
    for metric in ("suanli_jobs", "suanli_admissions_total", "suanli_preemptions_total"):
        labels = {dict(k)["queue"] for k in series(s, metric)}
        assert len(labels) <= 11
        assert OTHER_QUEUE in labels
    # The first ten seen are kept, and stay kept.
    assert m.queues == {f"q{i}" for i in range(10)}
    assert series(s, "suanli_jobs")[key(state="pending", queue=OTHER_QUEUE)] == 990
    assert series(s, "suanli_admissions_total")[key(queue="q3")] == 1
    assert series(s, "suanli_admissions_total")[key(queue=OTHER_QUEUE)] == 990


def test_default_keeps_a_hundred_queues() -> None:
    m = ControlMetrics()
    for i in range(1000):
        m.admitted(f"user-{i}")
    assert len(series(scrape(m), "suanli_admissions_total")) == 101


def test_names_that_are_not_queue_names_are_folded() -> None:
    m = ControlMetrics()
    m.admitted(OTHER_QUEUE)
    m.admitted("")
    m.admitted("x" * 300)
    assert series(scrape(m), "suanli_admissions_total") == {key(queue=OTHER_QUEUE): 3}
    assert m.queues == set()
    with pytest.raises(ValueError):
        ControlMetrics([OTHER_QUEUE])
    with pytest.raises(TypeError):
        ControlMetrics("vision")
    with pytest.raises(ValueError):
        ControlMetrics(max_queues=-1)


def test_other_labels_are_bounded() -> None:
    m = ControlMetrics()
    m.preempted("q", "reclaim")
    m.preempted("q", "made-up")
    m.request("GET", "/v1/jobs", 200)
    m.request("BREW", "/v1/jobs", 405)
    m.request("PROPFIND", "/v1/jobs", 405)
    m.set_jobs({("running", "q"): 1, ("weird", "q"): 2})
    s = scrape(m)
    assert series(s, "suanli_preemptions_total") == {
        key(queue="q", reason="reclaim"): 1,
        key(queue="q", reason="other"): 1,
    }
    assert series(s, "suanli_api_requests_total") == {
        key(method="GET", route="/v1/jobs", status="200"): 1,
        key(method="other", route="/v1/jobs", status="405"): 2,
    }
    assert series(s, "suanli_jobs") == {
        key(state="running", queue="q"): 1,
        key(state="other", queue="q"): 2,
    }
    for i in range(1000):
        m.request("GET", f"/r{i}", 200)
    assert len({dict(k)["route"] for k in series(scrape(m), "suanli_api_requests_total")}) <= 257


def test_tenant_view_shows_only_its_queues_and_no_request_counts() -> None:
    m = populated()
    s = scrape(m, {"vision"})
    assert queue_labels(s) == {"vision"}
    assert series(s, "suanli_jobs") == {key(state="running", queue="vision"): 2}
    assert series(s, "suanli_admissions_total") == {key(queue="vision"): 2}
    assert series(s, "suanli_preemptions_total") == {}
    assert not any(name.startswith("suanli_api_requests") for name, _ in s)
    # The shared hardware and the scheduler's own health are shown whole.
    assert series(s, "suanli_gpus") == {key(model="H100"): 8}
    assert series(s, "suanli_gpus_allocated") == {key(model="H100"): 2.5}
    assert s[("suanli_scheduling_cycle_seconds_count", key())] == 1
    body = m.render({"vision"})[0].decode()
    assert "nlp" not in body and "stranger" not in body and "api_requests" not in body
    # Two queues of one tenant; a queue it names that has no series shows nothing.
    s = scrape(m, ["vision", "nlp", "nowhere"])
    assert queue_labels(s) == {"vision", "nlp"}
    assert series(s, "suanli_preemptions_total") == {key(queue="nlp", reason="reclaim"): 1}
    # No queues at all: no queue series, still the shared ones.
    s = scrape(m, set())
    assert queue_labels(s) == set()
    assert series(s, "suanli_gpus") == {key(model="H100"): 8}


def test_folded_other_is_never_in_a_tenant_view() -> None:
    m = populated(["vision", "nlp"])
    assert OTHER_QUEUE in queue_labels(scrape(m))  # the admin view has it
    for queues in ({"vision"}, {"vision", OTHER_QUEUE}, {OTHER_QUEUE}, {"stranger"}):
        s = scrape(m, queues)
        assert OTHER_QUEUE not in queue_labels(s)
        assert OTHER_QUEUE.encode() not in m.render(queues)[0]
    with pytest.raises(TypeError):
        m.render("vision")


def test_full_view_shows_everything() -> None:
    m = populated()
    assert m.render(None) == m.render()
    s = scrape(m)
    assert queue_labels(s) == {"vision", "nlp", "stranger"}
    assert series(s, "suanli_api_requests_total") == {
        key(method="GET", route="/v1/jobs", status="200"): 1
    }


def test_hold_gauges_replace_what_they_said() -> None:
    m = ControlMetrics()
    m.set_holds({"a": 2, "b": 1}, {"cordon": 1})
    m.set_holds({"b": 1}, {})
    text = m.render(None, None)[0].decode()
    assert 'suanli_gpus_out_of_service{node="b"} 1.0' in text
    assert 'node="a"' not in text
    assert 'suanli_nodes_held{hold="cordon"} 0.0' in text
    assert 'suanli_nodes_held{hold="drain"} 0.0' in text
