"""Launch throughput, admission to running: the local backend against the Ray and Slurm
backends, in one run on the same machine (docs/backends.md has the figures).

For each engine a real ``suanli serve`` is started as its own process: ``--backend local``
with ``--gpus N`` declared; ``--backend ray`` on a Ray cluster this script starts
(``ray.cluster_utils``: a head and two nodes of N/2 declared GPUs each; there are no GPUs
here, Ray only counts them); ``--backend slurm`` on a private Slurm cluster this script
starts (tests/slurm_cluster.py: slurmctld, slurmdbd on MariaDB, two slurmd of N/2 GPUs
each, as GRES over stand-in devices; needs root and Debian's slurm-wlm, slurmdbd, munge and
mariadb-server). ``--jobs N`` single-GPU jobs are submitted at once; each task prints the
time it started. Per job, the launch latency is its task's start minus its admission (the
``admitted`` event of its history); the throughput is the jobs over the time from the first
admission to the last start. Printed: both, and Ray's and Slurm's figures as ratios of the
local backend's (the baseline, measured in the same run).

    PYTHONPATH=src python benchmarks/bench_launch.py [--jobs 32]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import start_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TASK = "import time; print(repr(time.time()), flush=True)"
# Run as root, the server runs tasks as nobody, who cannot run an interpreter under /root.
PY = next((p for p in ("/usr/bin/python3", "/bin/python3") if os.path.exists(p)), sys.executable)
PY = PY if os.geteuid() == 0 else sys.executable


def _at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def measure(url: str, headers: dict[str, str], jobs: int) -> dict[str, Any]:
    with httpx.Client(base_url=url, headers=headers, timeout=30) as c:
        ids = []
        for _ in range(jobs):
            r = c.post("/v1/jobs", json={"command": [PY, "-c", TASK], "gpus": 1})
            if r.status_code != 201:
                raise SystemExit(r.text)
            ids.append(r.json()["id"])
        deadline = time.monotonic() + 600
        admitted, started = [], []
        for job in ids:
            while True:
                detail = c.get(f"/v1/jobs/{job}").json()
                if detail["job"]["state"] in ("succeeded", "failed", "lost", "cancelled"):
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"job {job} did not end: {detail['job']}")
                time.sleep(0.1)
            if detail["job"]["state"] != "succeeded":
                raise SystemExit(f"job {job}: {detail['job']}")
            when = [e["at"] for e in detail["history"] if e["kind"] == "admitted"]
            admitted.append(_at(when[0]))
            started.append(float(c.get(f"/v1/jobs/{job}/logs").text.strip()))
    latency = [s - a for a, s in zip(admitted, started, strict=True)]
    span = max(started) - min(admitted)
    return {
        "jobs": jobs,
        "span_s": span,
        "per_s": jobs / span,
        "p50_s": statistics.median(latency),
        "p90_s": statistics.quantiles(latency, n=10)[-1],
    }


def run(engine: str, jobs: int, ray_address: str | None, shared: Path | None) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix=f"suanli-launch-{engine}-"))
    os.chmod(tmp, 0o755)
    if engine == "local":
        extra = ["--gpus", str(jobs), "--gpu-model", "H100"]
    elif engine == "ray":
        extra = ["--backend", "ray", "--ray-address", str(ray_address), "--shared-dir",
                 str(shared)]  # fmt: skip
    else:
        extra = ["--backend", "slurm", "--shared-dir", str(shared), "--slurm-python", PY]
    proc, url, headers = start_server(tmp, ["--interval", "0.05", *extra])
    try:
        return measure(url, headers, jobs)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=32)
    p.add_argument(
        "--node-cpus",
        type=int,
        default=1,
        help="CPUs each Ray node declares: Ray starts that many worker processes at once",
    )
    p.add_argument("--no-slurm", action="store_true", help="Leave the Slurm backend out.")
    args = p.parse_args()
    from ray.cluster_utils import Cluster

    slurm = None if args.no_slurm else run_slurm(args.jobs)

    base = Path(tempfile.mkdtemp(prefix="suanli-launch-ray-"))
    os.chmod(base, 0o755)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0,
                                                             "include_dashboard": False})  # fmt: skip
    try:
        for name in ("node-a", "node-b"):
            cluster.add_node(num_cpus=args.node_cpus, num_gpus=args.jobs // 2 + args.jobs % 2,
                             resources={"accelerator_type:H100": 1},
                             labels={"suanli.io/node": name})  # fmt: skip
        cluster.wait_for_nodes()
        shared = base / "shared"
        shared.mkdir()
        local = run("local", args.jobs, None, None)
        ray = run("ray", args.jobs, cluster.address, shared)
    finally:
        cluster.shutdown()
        shutil.rmtree(base, ignore_errors=True)
    print(f"launch, admission to running: {args.jobs} single-GPU jobs submitted at once")
    print(f"{'engine':8} {'span s':>8} {'launches/s':>11} {'p50 s':>7} {'p90 s':>7}")
    rows = [("local", local), ("ray", ray)] + ([("slurm", slurm)] if slurm else [])
    for name, r in rows:
        print(f"{name:8} {r['span_s']:8.2f} {r['per_s']:11.1f} {r['p50_s']:7.2f} {r['p90_s']:7.2f}")
    for name, r in rows[1:]:
        print(f"{name} / local: launches/s x{r['per_s'] / local['per_s']:.2f}, "
              f"p50 latency x{r['p50_s'] / local['p50_s']:.1f}")  # fmt: skip


def run_slurm(jobs: int) -> dict[str, Any]:
    """The Slurm backend on a private Slurm cluster of two nodes (tests/slurm_cluster.py)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import slurm_cluster as sc

    missing = sc.missing()
    if missing:
        raise SystemExit(f"Slurm: {', '.join(missing)} missing (or --no-slurm)")
    half = jobs // 2 + jobs % 2
    with sc.SlurmTestCluster(nodes={"n1": half, "n2": half}, cpus=max(8, half)) as cluster:
        os.environ["SLURM_CONF"] = cluster.env["SLURM_CONF"]
        shared = cluster.base / "shared"
        shared.mkdir()
        shared.chmod(0o755)
        try:
            return run("slurm", jobs, None, shared)
        finally:
            os.environ.pop("SLURM_CONF", None)


if __name__ == "__main__":
    main()
