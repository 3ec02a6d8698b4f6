"""The DLRM disaggregated-serving trace reader (``suanli.traces.dlrm``): rows as instances,
bad rows named by line and column (or skipped and counted), and the real trace's recorded
figures (``../shared/traces/README.md``: 23,871 instances of 156 services, 16,485 on CPU
nodes and 7,386 on GPU nodes), skipped with a message when the traces are absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from suanli.traces.dlrm import COLUMNS, load_dlrm_instances
from suanli.traces.errors import TraceFormatError
from support import trace_dir_or_skip

HN = "i0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,"
CN = "i1,CN,app_0,64,64,0,0,1,1,320,320,255,255,-1,475.5,480,2000"


def write(tmp_path: Path, *rows: str) -> Path:
    p = tmp_path / "dlrm.csv"
    p.write_text(",".join(COLUMNS) + "\n" + "\n".join(rows) + "\n")
    return p


def test_rows_read_as_instances(tmp_path: Path) -> None:
    d = load_dlrm_instances(write(tmp_path, HN, CN))
    hn, cn = d.instances
    assert (hn.role, hn.app, hn.cpu, hn.gpus, hn.rdma_pct, hn.memory_gib, hn.max_per_node) == (
        "HN",
        "app_0",
        12,
        1,
        25,
        120,
        8,
    )
    assert (hn.created, hn.scheduled, hn.deleted) == (None, None, None)
    assert (cn.gpus, cn.max_per_node, cn.created, cn.scheduled, cn.deleted) == (
        0,
        None,
        475.5,
        480,
        2000,
    )
    s = d.summary()
    assert s["instances"] == 2 and s["apps"] == 1
    assert s["HN"]["gpus"] == 1 and s["CN"]["cpu"] == 64  # type: ignore[index]


@pytest.mark.parametrize(
    "row, column, says",
    [
        (HN.replace(",HN,", ",XN,"), "role", "expected a role of CN or HN, got 'XN'"),
        (HN.replace(",12,12,", ",14,12,"), "cpu_request", "cpu_request 14 is above its limit 12"),
        (HN.replace(",12,12,", ",-1,12,"), "cpu_request", "expected a number >= 0, got '-1'"),
        (CN.replace(",0,0,", ",1,1,"), "gpu_request", "a CN instance with 1 GPUs"),
        (HN.replace(",1,1,25", ",0,0,25"), "gpu_request", "a HN instance with 0 GPUs"),
        (HN.replace(",1,1,25", ",0.5,1,25"), "gpu_request", "a whole number of GPUs"),
        (HN.replace(",25,25,", ",125,125,"), "rdma_request", "0-100% of a NIC, got 125"),
        (HN.replace(",8,,,", ",0,,,"), "max_instance_per_node", "-1 (no limit) or at least 1"),
        (HN.replace(",8,,,", ",-2,,,"), "max_instance_per_node", "expected an integer >= -1"),
        (CN.replace(",475.5,480,", ",475.5,470,"), "scheduled_time", "before its creation"),
        (CN.replace(",2000", ",400"), "deletion_time", "before it started at 480 s"),
        (CN.replace(",2000", ",x"), "deletion_time", "expected a number >= 0, got 'x'"),
        (HN.replace("i0,", "k9,"), "instance_sn", "instance 'k9' appears twice"),
    ],
)  # fmt: skip
def test_a_bad_row_is_named_by_line_and_column(tmp_path: Path, row: str, column: str,
                                                 says: str) -> None:  # fmt: skip
    path = write(tmp_path, CN.replace("i1,", "k9,"), row)
    with pytest.raises(TraceFormatError) as err:
        load_dlrm_instances(path)
    e = err.value
    assert (e.line, e.column) == (3, column) and says in e.message, e.message
    kept = load_dlrm_instances(path, skip_bad_rows=True)
    assert [i.sn for i in kept.instances] == ["k9"]  # nothing accepted is lost
    assert kept.skipped is not None and kept.skipped.rows_skipped == 1


def test_the_real_trace_holds_its_recorded_counts() -> None:
    path = trace_dir_or_skip() / "dlrm-2025" / "disaggregated_DLRM_trace.csv"
    d = load_dlrm_instances(path)
    s = d.summary()
    assert (s["instances"], s["apps"]) == (23_871, 156)
    assert s["CN"]["instances"] == 16_485 and s["HN"]["instances"] == 7_386  # type: ignore[index]
    assert s["HN"]["gpus"] == 7_386 and s["CN"]["gpus"] == 0  # type: ignore[index]
    # Every service has instances on both kinds of node: each is disaggregated.
    assert s["CN"]["apps"] == s["HN"]["apps"] == 156  # type: ignore[index]
