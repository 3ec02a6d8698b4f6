"""Control-plane metrics: values as Prometheus parses them, gauges replaced (not left stale),
the cycle histogram, and independent registries per instance."""

from __future__ import annotations

import math

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from suanli.control.metrics import CYCLE_BUCKETS, ControlMetrics

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(m: ControlMetrics) -> Samples:
    """Every sample of the rendered text, by (sample name, labels)."""
    body, content_type = m.render()
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
    assert series(s, "suanli_gpus_total") == {key(model="H100"): 16, key(model="A100"): 8}
    assert series(s, "suanli_gpus_allocated") == {
        key(model="H100"): 10.5,
        key(model="A100"): 0,
    }


def test_gpu_gauges_are_replaced() -> None:
    m = ControlMetrics()
    m.set_gpus({"H100": 16, "A100": 8}, {"H100": 4, "A100": 2})
    m.set_gpus({"H100": 8}, {"H100": 0.25})
    s = scrape(m)
    assert series(s, "suanli_gpus_total") == {key(model="H100"): 8}
    assert series(s, "suanli_gpus_allocated") == {key(model="H100"): 0.25}
    m.set_gpus({}, {})
    s = scrape(m)
    assert series(s, "suanli_gpus_total") == {}
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
    assert "# TYPE suanli_gpus_total gauge" in text
    assert "# TYPE suanli_scheduling_cycle_seconds histogram" in text
    assert "# TYPE suanli_admissions_total counter" in text
    assert 'suanli_gpus_total{model="H200"} 8.0' in text


def test_instances_are_independent() -> None:
    a, b = ControlMetrics(), ControlMetrics()
    a.set_gpus({"H100": 8}, {"H100": 8})
    a.admitted("q", 5)
    a.observe_cycle(0.01)
    b.set_gpus({"A100": 4}, {})
    b.admitted("q")
    sa, sb = scrape(a), scrape(b)
    assert series(sa, "suanli_gpus_total") == {key(model="H100"): 8}
    assert series(sb, "suanli_gpus_total") == {key(model="A100"): 4}
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
