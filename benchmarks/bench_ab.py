"""A named base commit against the working tree, side by side: the ratio of median CPU times.

    python benchmarks/bench_ab.py BASE [--runs 5] [--only sim-100k,sim-1m,...] [--json FILE]

BASE (a commit, tag or branch) is checked out into a temporary git worktree; each scenario
then runs as a fresh process, alternately from the base tree and from this one (base first
on even rounds, new first on odd ones), ``--runs`` times each, with ``PYTHONPATH`` naming the
tree's own ``src`` (the process prints the ``suanli`` it imported, which is checked). A run's
figure is the CPU time (user + system) of its process and children; each tree is warmed once
first, untimed (compiled kernels are cached per tree). Printed per scenario: every sample, the
medians and ``new / base``. Scenarios, each the tree's own benchmark script:

  sim-100k      bench_sim.py --one 100k
  sim-1m        bench_sim.py --one 1m
  sim-saturated bench_sim.py --one saturated --no-baseline   (the scheduler, not the rescan)
  backfill      bench_backfill.py --no-reference             (plain, EASY, conservative)
  kueue         bench_kueue.py
  fgd           suanli bench fgd --pods default --seeds 42 --workers 1 --json
  predict       suanli bench predict --trace philly --jobs 30000 (FIFO, FIFO with EASY, LAS,
                QSSF on history; start-time estimates in every row but the search's)
  network       suanli bench network --seeds 0 --workers 1 (the four routers, federation and
                ledger, on the compute network's fixed week)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

SCENARIOS: dict[str, list[str]] = {
    "sim-100k": ["benchmarks/bench_sim.py", "--one", "100k"],
    "sim-1m": ["benchmarks/bench_sim.py", "--one", "1m"],
    "sim-saturated": ["benchmarks/bench_sim.py", "--one", "saturated", "--no-baseline"],
    "backfill": ["benchmarks/bench_backfill.py", "--no-reference"],
    "kueue": ["benchmarks/bench_kueue.py"],
    "fgd": ["-m", "suanli.cli.main", "bench", "fgd", "--pods", "default", "--seeds", "42",
            "--workers", "1", "--json"],
    "predict": ["-m", "suanli.cli.main", "bench", "predict", "--trace", "philly", "--jobs",
                "30000", "--policies", "fifo/easy@history+best-fit,las+best-fit,"
                "qssf@history+best-fit", "--workers", "1", "--json"],
    "network": ["-m", "suanli.cli.main", "bench", "network", "--seeds", "0", "--workers", "1",
                "--json"],
}  # fmt: skip

PROBE = "import suanli, sys; sys.stdout.write(suanli.__file__)"


def tree_env(tree: Path) -> dict[str, str]:
    """The environment a run in ``tree`` gets: its own ``src``, and the public traces this
    checkout sees (a worktree elsewhere has no ``../shared`` beside it)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    traces = HERE.parent / "shared" / "traces"
    if "SUANLI_TRACE_DIR" not in env and traces.is_dir():
        env["SUANLI_TRACE_DIR"] = str(traces)
    return env


@contextmanager
def base_tree(rev: str) -> Iterator[Path]:
    """``rev`` checked out in a temporary git worktree (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="suanli-ab-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), rev],
            cwd=HERE, check=True, capture_output=True,
        )  # fmt: skip
        try:
            yield base
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)], cwd=HERE, check=False
            )


def cpu_of(tree: Path, args: list[str]) -> float:
    """CPU seconds (user + system) of ``python ARGS`` run in ``tree`` on its own ``src``."""
    env = tree_env(tree)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def check_imports(tree: Path) -> None:
    env = tree_env(tree)
    got = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=tree, env=env, capture_output=True, text=True
    ).stdout
    if not Path(got).resolve().is_relative_to((tree / "src").resolve()):
        raise SystemExit(f"{tree}: imported suanli from {got}, not from its own src")


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", help="the commit to compare with (the one before the change)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    ap.add_argument("--json", type=Path, help="also write the samples here")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    for n in names:
        if n not in SCENARIOS:
            raise SystemExit(f"unknown scenario {n!r} (known: {', '.join(SCENARIOS)})")
    with base_tree(args.base) as base:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=base, capture_output=True, text=True
        ).stdout.strip()
        trees = {"base": base, "new": HERE}
        for tree in trees.values():
            check_imports(tree)
        print(f"base {args.base} ({rev}) against the working tree, {args.runs} runs each")
        results = {}
        for name in names:
            cmd = SCENARIOS[name]
            for tree in trees.values():  # warm: compile and cache kernels, untimed
                cpu_of(tree, cmd)
            samples: dict[str, list[float]] = {"base": [], "new": []}
            for k in range(args.runs):
                order = ("base", "new") if k % 2 == 0 else ("new", "base")
                for which in order:
                    samples[which].append(cpu_of(trees[which], cmd))
            mb, mn = statistics.median(samples["base"]), statistics.median(samples["new"])
            results[name] = {"base": samples["base"], "new": samples["new"], "ratio": mn / mb}
            print(
                f"{name:14s} base median {mb:8.2f} s  new median {mn:8.2f} s  "
                f"new/base {mn / mb:5.3f}   base {fmt(samples['base'])}  "
                f"new {fmt(samples['new'])}",
                flush=True,
            )
        if args.json is not None:
            args.json.write_text(json.dumps({"base": rev, "results": results}, indent=1))


def fmt(xs: list[float]) -> str:
    return "[" + ", ".join(f"{x:.2f}" for x in xs) + "]"


if __name__ == "__main__":
    main(sys.argv[1:])
