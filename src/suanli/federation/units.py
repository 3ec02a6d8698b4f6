"""The common compute measure: one unit is an hour of 125 dense FP16/BF16 tensor TFLOP/s,
a V100's (so a V100-hour is 1 unit, an A100-hour 2.5, an H100-hour 7.9).

Per GPU model, dense FP16/BF16 tensor TFLOP/s from the vendors' datasheets
(``../shared/docs/ANCHORS.md``, "Compute per GPU model"): V100 125, T4 65, A10 125, A100
312, H100 989; the export parts A800 and H800 have their sources' compute (NVIDIA's A800
and H800 datasheets: the NVLink bandwidth is cut, not the tensor cores). P100 has no tensor
cores: its 21.2 TFLOP/s is plain FP16. K80 and P40 have no fast FP16: their FP32 8.7 and
11.8.

The traces' anonymised models take the figure of the named class their readers already
assume (``suanli.traces``): openb's G2 and G3 and PAI 2020's V100 variants as V100;
PAI 2020's MISC as a P100 (its reader gives it a P100's speed); the 2026 spot inventory's
GPU-series-1 and -2 as an A100 (80 GiB parts of A100 speed). ASSUMPTION, stated because no
trace names them.

A unit compares what a GPU *could* do: a price per unit, a quota in units and a capacity in
units mean the same across models and regions. How fast a job runs on a model is the
simulator's speed table (``GpuModel.speed``): runtime scales with it, not with TFLOP/s.
"""

from __future__ import annotations

from collections.abc import Mapping

from suanli.core.model import SpecError

__all__ = ["REFERENCE_TFLOPS", "TFLOPS", "units_per_gpu_hour"]

REFERENCE_TFLOPS = 125.0
"""One unit: an hour of a V100's dense FP16 tensor compute."""

TFLOPS: Mapping[str, float] = {
    "V100": 125.0, "V100M16": 125.0, "V100M32": 125.0, "T4": 65.0, "A10": 125.0,
    "A100": 312.0, "A100-40G": 312.0, "A800": 312.0, "H100": 989.0, "H800": 989.0,
    "H200": 989.0, "B200": 2250.0, "L40S": 362.0, "P100": 21.2, "K80": 8.7, "P40": 11.8,
    # Anonymised models, as their readers' named class (module docstring).
    "G2": 125.0, "G3": 125.0, "MISC": 21.2, "GPU-series-1": 312.0, "GPU-series-2": 312.0,
}  # fmt: skip
"""Dense FP16/BF16 tensor TFLOP/s per GPU model (module docstring)."""


def units_per_gpu_hour(model: str, table: Mapping[str, float] = TFLOPS) -> float:
    """Common units one GPU of ``model`` gives in an hour."""
    tf = table.get(model)
    if tf is None:
        raise SpecError(f"no compute figure for GPU model {model!r} (known: "
                        f"{', '.join(sorted(table))})")  # fmt: skip
    return tf / REFERENCE_TFLOPS
