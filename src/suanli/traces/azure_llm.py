"""Azure LLM inference trace 2023: about an hour of requests to two LLM services (Splitwise).

Files ``AzureLLMInferenceTrace_code.csv`` and ``AzureLLMInferenceTrace_conv.csv``
(``Azure/AzurePublicDataset``, ``data/``): ``TIMESTAMP, ContextTokens, GeneratedTokens``
-> :func:`load_azure_llm`, then :meth:`LlmRequests.to_jobs` to replay them as inference
jobs, on :func:`azure_llm_cluster` by default.

Every assumption is a keyword argument; ``docs/traces.md`` lists them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from suanli.core.model import KNOWN_GPU_MODELS, GpuModel, Job, NodeSpec, TaskRequest
from suanli.core.speed import SpeedBasis
from suanli.traces.base import (
    GIB,
    TraceCluster,
    TraceJobs,
    check_non_negative,
    check_positive,
    resolve_gpu_model,
)
from suanli.traces.errors import SkipReport
from suanli.traces.table import (
    Header,
    RowParser,
    TimestampParser,
    parse_int,
    paused_gc,
    read_rows,
)

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
FILE_PREFIX = "AzureLLMInferenceTrace_"

# Throughput of one request at reference speed (a V100-class GPU, speed 1.0), and the GPU
# share one request holds. ASSUMPTIONS (the trace has tokens only, no model or hardware):
# prompt processing at 4,000 tokens/s and generation at 25 tokens/s per request, a request
# holding a quarter of a GPU (four requests batched on a GPU) for its whole duration. On an
# H100 (speed 5) a 1,000-token prompt with 200 generated tokens then takes 1.65 s.
PREFILL_TOKENS_PER_S = 4000.0
DECODE_TOKENS_PER_S = 25.0
REQUEST_GPU_MILLI = 250
REQUEST_CPU_MILLI = 1000
REQUEST_MEMORY_MIB = 2 * GIB

# The runtimes above are stated for a V100-class GPU, so that is their native model (the
# trace records no hardware, and no durations, only tokens): on the default H100 server, and
# on any GPU but a V100, they run runtime x 1.0 / speed (suanli.core.speed).
AZURE_BASIS = SpeedBasis(("V100",), KNOWN_GPU_MODELS["V100"].speed)

# Default cluster for the replay. ASSUMPTION: one 8 x H100 server (112 cores and 2 TiB, the
# proportions of a DGX H100); the conversation trace then keeps it about 30% allocated on
# average under the request assumptions above, the code trace about 3%.
AZURE_NODES = 1
AZURE_GPUS_PER_NODE = 8
AZURE_GPU_MODEL = "H100"
AZURE_NODE_CPU_MILLI = 112_000
AZURE_NODE_MEMORY_MIB = 2048 * GIB


@dataclass(frozen=True, eq=False)
class LlmRequests:
    """Requests of one Azure LLM service, by column, in file order.

    ``arrival`` is in seconds after the earliest request (``start`` holds that request's
    timestamp as seconds since 1970, read as wall-clock time); token counts are ``int64``.
    ``service`` is the file's service name (``code``, ``conv``) or, for another file name,
    its stem.
    """

    source: Path
    service: str
    start: float
    arrival: np.ndarray
    context_tokens: np.ndarray
    generated_tokens: np.ndarray
    skipped: SkipReport | None = None

    def __len__(self) -> int:
        return len(self.arrival)

    def runtimes(
        self,
        prefill_tokens_per_s: float = PREFILL_TOKENS_PER_S,
        decode_tokens_per_s: float = DECODE_TOKENS_PER_S,
    ) -> np.ndarray:
        """Seconds each request runs at reference speed: prompt plus generation time."""
        check_positive("prefill_tokens_per_s", prefill_tokens_per_s)
        check_positive("decode_tokens_per_s", decode_tokens_per_s)
        out: np.ndarray = (
            self.context_tokens / prefill_tokens_per_s + self.generated_tokens / decode_tokens_per_s
        )
        return out

    def to_jobs(
        self,
        *,
        prefill_tokens_per_s: float = PREFILL_TOKENS_PER_S,
        decode_tokens_per_s: float = DECODE_TOKENS_PER_S,
        gpu_milli: int = REQUEST_GPU_MILLI,
        gpu_memory_mib: int = 0,
        cpu_milli: int = REQUEST_CPU_MILLI,
        memory_mib: int = REQUEST_MEMORY_MIB,
        gpu_models: Iterable[str] | None = None,
        priority_class: str = "online",
        tenant: str | None = None,
        queue: str | None = None,
    ) -> TraceJobs:
        """One inference job per request, in arrival order (ties: file order).

        - ``id`` ``azure-<service>-NNNNN``, the request's position among the rows read
          (from 0); ``submit`` = ``arrival``.
        - ``runtime`` = ``ContextTokens / prefill_tokens_per_s + GeneratedTokens /
          decode_tokens_per_s`` seconds at reference speed (the simulator divides it by the
          GPU's speed).
        - one task holding ``gpu_milli`` of one GPU (1000: a whole GPU) with
          ``gpu_memory_mib`` of its memory (default 0: the trace says nothing of memory, as
          openb's shared-GPU pods), ``cpu_milli`` and ``memory_mib``; ``gpu_models`` limits
          the models (default: any).
        - ``priority_class`` ``online``; ``tenant`` ``azure-llm/<service>`` and ``queue``
          ``<service>`` unless given.
        """
        if not 1 <= gpu_milli <= 1000:
            raise ValueError(f"gpu_milli must be in 1..1000, got {gpu_milli}")
        runtime = self.runtimes(prefill_tokens_per_s, decode_tokens_per_s).tolist()
        task = TaskRequest(
            gpus=1,
            gpu_milli=gpu_milli,
            gpu_memory_mib=gpu_memory_mib,
            cpu_milli=cpu_milli,
            memory_mib=memory_mib,
            gpu_models=frozenset(gpu_models or ()),
        )
        tenant = tenant if tenant is not None else f"azure-llm/{self.service}"
        queue = queue if queue is not None else self.service
        width = max(5, len(str(len(self))))
        arrival = self.arrival.tolist()
        order = np.argsort(self.arrival, kind="stable").tolist()
        with paused_gc():
            jobs = [
                Job(
                    id=f"azure-{self.service}-{i:0{width}d}",
                    submit=arrival[i],
                    runtime=runtime[i],
                    task=task,
                    tenant=tenant,
                    queue=queue,
                    priority_class=priority_class,
                )
                for i in order
            ]
        return TraceJobs(jobs, self.skipped)


def load_azure_llm(path: str | Path, *, skip_bad_rows: bool = False) -> LlmRequests:
    """Read one Azure LLM inference trace file into :class:`LlmRequests`.

    ``TIMESTAMP`` is ``YYYY-MM-DD HH:MM:SS.fffffff`` (read as wall-clock time; only
    differences are used), the token counts integers >= 0.
    """
    stamp = TimestampParser()

    def make(h: Header) -> RowParser[tuple[float, int, int]]:
        i_t, i_c, i_g = (h.index[c] for c in COLUMNS)

        def parse(row: list[str], line: int) -> tuple[float, int, int]:
            return (
                stamp(row[i_t], "TIMESTAMP"),
                parse_int(row[i_c], "ContextTokens"),
                parse_int(row[i_g], "GeneratedTokens"),
            )

        return parse

    rows, skipped, _ = read_rows(path, COLUMNS, (), make, skip_bad_rows=skip_bad_rows)
    p = Path(path)
    service = p.stem[len(FILE_PREFIX) :] if p.stem.startswith(FILE_PREFIX) else p.stem
    times = np.array([r[0] for r in rows], dtype=np.float64)
    start = float(times.min()) if len(times) else 0.0
    return LlmRequests(
        source=p,
        service=service or p.stem,
        start=start,
        arrival=times - start,
        context_tokens=np.array([r[1] for r in rows], dtype=np.int64),
        generated_tokens=np.array([r[2] for r in rows], dtype=np.int64),
        skipped=skipped,
    )


def azure_llm_cluster(
    nodes: int = AZURE_NODES,
    gpus_per_node: int = AZURE_GPUS_PER_NODE,
    gpu_model: str | GpuModel = AZURE_GPU_MODEL,
    *,
    cpu_milli: int = AZURE_NODE_CPU_MILLI,
    memory_mib: int = AZURE_NODE_MEMORY_MIB,
    name: str = "azure-llm",
) -> TraceCluster:
    """The default cluster to replay the Azure LLM traces on (ASSUMPTION: the trace names no
    hardware): ``nodes`` servers of ``gpus_per_node`` GPUs, ``cpu_milli`` and ``memory_mib``
    each."""
    check_positive("nodes", nodes)
    check_positive("gpus_per_node", gpus_per_node)
    check_non_negative("cpu_milli", cpu_milli)
    check_non_negative("memory_mib", memory_mib)
    model = resolve_gpu_model(gpu_model)
    width = max(2, len(str(nodes - 1)))
    return TraceCluster(
        name,
        tuple(
            NodeSpec(f"{name}-{i:0{width}d}", gpus_per_node, model, cpu_milli, memory_mib)
            for i in range(nodes)
        ),
    )
