"""A tiny openb-shaped trace directory, for tests of the FGD replay that need no real traces.

Three GPU nodes (10 GPUs) and nine pods: shared GPUs, whole GPUs, CPU-only pods and GPU-model
constraints. ``write_tiny_traces(root)`` writes ``root/openb/openb_node_list_gpu_node.csv``,
``root/openb/openb_pod_list_tiny.csv`` and a published-results file with one row per policy.
"""

from __future__ import annotations

from pathlib import Path

NODES = """sn,cpu_milli,memory_mib,gpu,model
tiny-node-0,32000,131072,4,G2
tiny-node-1,32000,131072,4,T4
tiny-node-2,16000,65536,2,P100
"""

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
)
# name, CPU, memory, GPUs, milli-GPU, acceptable models
PODS = [
    ("p0", 4000, 8192, 1, 500, ""),
    ("p1", 8000, 16384, 1, 1000, ""),
    ("p2", 2000, 4096, 0, 0, ""),
    ("p3", 6000, 8192, 2, 1000, ""),
    ("p4", 1000, 2048, 1, 250, "T4|P100"),
    ("p5", 4000, 8192, 1, 300, ""),
    ("p6", 12000, 32768, 1, 1000, "G2"),
    ("p7", 2000, 4096, 1, 700, ""),
    ("p8", 1000, 1024, 0, 0, ""),
]
TINY_GPUS = 10
TINY_DEMAND = 500 + 1000 + 2 * 1000 + 250 + 300 + 1000 + 700

PUBLISHED_HEADER = (
    "workload,sc_policy,n_seeds,alloc_pct@100_median,unalloc_gpu_pct@100_median,"
    "alloc_pct@130_median,unalloc_gpu_pct@130_median,frag_over_total_pct@100_median,"
    "frag_over_total_pct@130_median\n"
)
PUBLISHED_ROWS = [
    "openb_pod_list_tiny,05-BestFit,10,80.00,20.00,85.00,15.00,10.00,9.00",
    "openb_pod_list_tiny,06-FGD,10,90.00,10.00,92.50,7.50,5.00,4.00",
]


def pod_csv(pods: list[tuple[str, int, int, int, int, str]]) -> str:
    lines = [
        f"{name},{cpu},{mem},{n},{milli},{spec},LS,Running,{i},{i + 100},{i}"
        for i, (name, cpu, mem, n, milli, spec) in enumerate(pods)
    ]
    return POD_HEADER + "\n".join(lines) + "\n"


def write_tiny_traces(root: Path) -> Path:
    """The tiny trace directory under ``root`` (returned)."""
    openb = root / "openb"
    openb.mkdir(parents=True, exist_ok=True)
    (openb / "openb_node_list_gpu_node.csv").write_text(NODES)
    (openb / "openb_pod_list_tiny.csv").write_text(pod_csv(PODS))
    (openb / "fgd_published_median_10_seeds.csv").write_text(
        PUBLISHED_HEADER + "\n".join(PUBLISHED_ROWS) + "\n"
    )
    return root
