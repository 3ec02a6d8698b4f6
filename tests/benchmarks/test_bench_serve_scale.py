"""``bench_serve.py scale`` on a tiny cluster: the loop places every job, the core's cycle
alone places the same ones, and both figures and their ratio are printed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_serve  # noqa: E402


def test_the_scale_benchmark_places_every_job_live_and_in_the_core(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench_serve.bench_scale(nodes=6, jobs=40)
    out = capsys.readouterr().out
    assert "6 nodes x 8 GPUs, 40 single-GPU jobs pending in the store" in out
    assert re.search(r"^loop   40 placed in .* placements/s \(recover .*, 1 pass;", out, re.M)
    assert re.search(r"^cycle  40 placed in .* placements/s \(1 cycle;", out, re.M)
    assert re.search(r"^ratio  loop / cycle: \d+\.\d\d", out, re.M)


def test_the_scale_benchmark_takes_more_passes_when_jobs_outnumber_gpus(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit, match="16 of 20 running"):
        bench_serve.bench_scale(nodes=2, jobs=20)
