"""Trace readers: how each file maps into the core model, on small files."""

from __future__ import annotations

from datetime import timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from suanli.core.model import KNOWN_GPU_MODELS, MILLI, GpuModel, SpecError
from suanli.traces import (
    OPENB_GPU_MODELS,
    TraceCluster,
    azure_llm_cluster,
    gang_split,
    itp_cluster,
    itp_node_count,
    load_azure_llm,
    load_itp_jobs,
    load_openb_nodes,
    load_openb_pods,
    load_pai2020_machines,
    load_philly_jobs,
    load_philly_machines,
    load_philly_user_jobs,
    load_spot2026_nodes,
    resolve_gpu_model,
)
from suanli.traces.errors import TraceFormatError

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)


def write(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


# ------------------------------------------------------------------------------------------
# openb
# ------------------------------------------------------------------------------------------


def test_openb_nodes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "nodes.csv",
        "sn,cpu_milli,memory_mib,gpu,model",
        "cpu-0,32000,262144,0,",
        "g2-0,96000,393216,8,G2",
        "t4-0,104000,524288,2,T4",
    )
    c = load_openb_nodes(path)
    assert isinstance(c, TraceCluster) and c.name == "openb"
    cpu, g2, t4 = c.nodes
    assert (cpu.gpus, cpu.gpu_model, cpu.cpu_milli, cpu.memory_mib) == (0, None, 32000, 262144)
    assert g2.gpu_model == OPENB_GPU_MODELS["G2"] and g2.gpus == 8
    assert t4.gpu_model is KNOWN_GPU_MODELS["T4"]
    other = load_openb_nodes(path, gpu_models={"G2": GpuModel("G2", 1000), "T4": GpuModel("T4", 9)})
    assert other.nodes[1].gpu_model == GpuModel("G2", 1000)


def test_openb_nodes_reject_unknown_model_and_duplicates(tmp_path: Path) -> None:
    head = "sn,cpu_milli,memory_mib,gpu,model"
    with pytest.raises(ValueError, match="unknown GPU model 'G9'"):
        load_openb_nodes(write(tmp_path, "a.csv", head, "n,1,1,8,G9"))
    with pytest.raises(ValueError, match="needs a GPU model"):
        load_openb_nodes(write(tmp_path, "b.csv", head, "n,1,1,8,none"))
    with pytest.raises(ValueError, match="'n' appears twice"):
        load_openb_nodes(write(tmp_path, "c.csv", head, "n,1,1,0,", "n,1,1,0,"))


def _pods(tmp_path: Path) -> Path:
    return write(
        tmp_path,
        "pods.csv",
        POD_HEADER,
        "p0,12000,16384,1,1000,,LS,Running,100,1100,100",  # whole GPU, LS -> high
        "p1,6000,12288,1,460,,LS,Running,50,80,51",  # shared, LS -> online
        "p2,8000,30517,0,0,,BE,Running,300,300,300",  # CPU-only, zero runtime
        "p3,88000,327680,8,1000,V100M16|V100M32,Guaranteed,Pending,200,900,",
        "p4,3000,5600,1,590,,BE,Failed,50,60,50",  # shared, BE -> normal
    )


def test_openb_pods_columns(tmp_path: Path) -> None:
    pods = load_openb_pods(_pods(tmp_path))
    assert len(pods) == 5 and pods.timed
    assert pods.names == ("p0", "p1", "p2", "p3", "p4")
    assert pods.num_gpu.dtype == np.int64
    assert pods.gpu_milli.tolist() == [1000, 460, 0, 1000, 590]
    assert pods.gpu_spec[3] == frozenset({"V100M16", "V100M32"})
    assert pods.gpu_spec[0] == frozenset()
    assert pods.qos == ("LS", "LS", "BE", "Guaranteed", "BE")
    assert pods.pod_phase is not None and pods.pod_phase[3] == "Pending"
    assert pods.scheduled_time is not None and pods.scheduled_time.tolist()[3] == -1
    assert pods.fractional.tolist() == [False, True, False, False, True]
    sub = pods.select(pods.num_gpu > 0)
    assert sub.names == ("p0", "p1", "p3", "p4") and sub.qos == ("LS", "LS", "Guaranteed", "BE")


def test_openb_pods_to_jobs(tmp_path: Path) -> None:
    jobs = load_openb_pods(_pods(tmp_path)).to_jobs()
    by = {j.id: j for j in jobs}
    assert [j.id for j in jobs] == ["p1", "p4", "p0", "p3", "p2"]  # by creation, ties in order
    assert [j.submit for j in jobs] == [0.0, 0.0, 50.0, 150.0, 250.0]
    assert by["p0"].runtime == 1000.0 and by["p2"].runtime == 1.0  # min_runtime
    assert by["p0"].task.gpus == 1 and not by["p0"].task.fractional
    assert by["p1"].task.fractional and by["p1"].task.gpu_milli == 460
    assert by["p1"].task.gpu_memory_mib == 0
    assert by["p2"].task.gpus == 0 and by["p2"].task.cpu_milli == 8000
    assert by["p3"].task.gpus == 8 and by["p3"].task.gpu_models == {"V100M16", "V100M32"}
    assert by["p3"].task.memory_mib == 327680
    classes = {j.id: j.priority_class for j in jobs}
    assert classes == {"p0": "high", "p1": "online", "p2": "normal", "p3": "high", "p4": "normal"}
    assert all(j.tenant == "openb" and j.tasks == 1 for j in jobs)


def test_openb_pods_to_jobs_options(tmp_path: Path) -> None:
    pods = load_openb_pods(_pods(tmp_path))
    jobs = pods.to_jobs(
        qos_classes={"LS": "normal", "BE": "spot", "Guaranteed": "high"},
        shared_ls_class=None,
        min_runtime=0.0,
        tenant="t",
    )
    by = {j.id: j for j in jobs}
    assert by["p1"].priority_class == "normal" and by["p4"].priority_class == "spot"
    assert by["p2"].runtime == 0.0 and by["p2"].tenant == "t"
    with pytest.raises(ValueError, match="qos 'Guaranteed' has no priority class"):
        pods.to_jobs(qos_classes={"LS": "high", "BE": "normal"})
    with pytest.raises(ValueError, match="only for lists without them"):
        pods.to_jobs(arrival_interval=1.0, untimed_runtime=5.0)


def test_openb_untimed_list(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "openb_pod_list_multigpu20.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli",
        "a,1000,1024,1,1000",
        "b,1000,1024,2,1000",
    )
    pods = load_openb_pods(path)
    assert not pods.timed and pods.qos is None and pods.creation_time is None
    with pytest.raises(ValueError, match="has no creation or deletion times"):
        pods.to_jobs()
    jobs = pods.to_jobs(arrival_interval=2.0, untimed_runtime=1e7)
    assert [(j.id, j.submit, j.runtime) for j in jobs] == [("a", 0.0, 1e7), ("b", 2.0, 1e7)]
    assert {j.priority_class for j in jobs} == {"normal"}


def test_openb_pod_consistency_checks(tmp_path: Path) -> None:
    cases = {
        "p,1,1,0,500,,LS,Running,0,1,0": "CPU-only pod",
        "p,1,1,1,0,,LS,Running,0,1,0": "needs gpu_milli in 1..1000",
        "p,1,1,4,500,,LS,Running,0,1,0": "is for a 1-GPU pod",
        "p,1,1,1,500,,LS,Running,9,1,0": "deletion_time 1 is before creation_time 9",
    }
    for i, (row, message) in enumerate(cases.items()):
        with pytest.raises(ValueError, match=message):
            load_openb_pods(write(tmp_path, f"{i}.csv", POD_HEADER, row))


# ------------------------------------------------------------------------------------------
# Philly and ITP
# ------------------------------------------------------------------------------------------


def test_gang_split() -> None:
    assert gang_split(1) == (1, 1)
    assert gang_split(8) == (1, 8)
    assert gang_split(12) == (2, 6)
    assert gang_split(16) == (2, 8)
    assert gang_split(24) == (3, 8)
    assert gang_split(128) == (16, 8)
    assert gang_split(11) == (11, 1)
    assert gang_split(12, 4) == (3, 4)
    with pytest.raises(SpecError):
        gang_split(0)


PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster"


def test_philly_jobs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "philly_jobs.csv",
        PHILLY_HEADER,
        "2017-10-09 07:01:55,66.0,1,66.0,vcA",
        "2017-10-09 06:00:00,100.0,16,1600.0,vcB",
        "2017-10-10 06:00:00,50.0,12,600.0,vcA",
        "2017-10-09 06:00:00,10.0,4,40.0,vcA",
    )
    jobs = load_philly_jobs(path)
    assert [j.id for j in jobs] == ["philly-00002", "philly-00004", "philly-00001", "philly-00003"]
    assert [j.submit for j in jobs] == [0.0, 0.0, 3715.0, 86400.0]
    gang = jobs[0]
    assert (gang.tasks, gang.task.gpus, gang.gang_min, gang.min_tasks) == (2, 8, 0, 2)
    assert gang.task.cpu_milli == 8 * 4000 and gang.task.memory_mib == 8 * 32 * 1024
    assert (jobs[3].tasks, jobs[3].task.gpus) == (2, 6)
    assert gang.tenant == "philly/vcB" and gang.queue == "vcB"
    assert all(j.priority_class == "normal" and j.task.gpu_models == frozenset() for j in jobs)
    assert sum(j.gpu_demand_milli * j.runtime for j in jobs) / MILLI == 66 + 1600 + 600 + 40
    other = load_philly_jobs(
        path, ["K80"], gpus_per_task=4, cpu_milli_per_gpu=1000, memory_mib_per_gpu=0
    )
    assert (other[0].tasks, other[0].task.gpus, other[0].task.cpu_milli) == (4, 4, 4000)
    assert other[0].task.gpu_models == frozenset({"K80"})


def test_philly_time_zone(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "j.csv",
        PHILLY_HEADER,
        "2017-11-05 00:30:00,1,1,1,v",
        "2017-11-05 03:30:00,1,1,1,v",
    )
    assert load_philly_jobs(path)[1].submit == 3 * 3600
    # A zone whose clock goes back an hour in between: the real gap is an hour longer.
    try:
        from zoneinfo import ZoneInfo

        tz = ZoneInfo("America/Los_Angeles")
    except Exception:  # pragma: no cover - no tz database here
        pytest.skip("no time zone database")
    assert load_philly_jobs(path, tz=tz)[1].submit == 4 * 3600
    assert load_philly_jobs(path, tz=timezone(timedelta(hours=-8)))[1].submit == 3 * 3600


def test_philly_machines(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "cluster_machine_list.csv",
        "machineId, number of GPUs, single GPU mem",
        "m0,2, 12GB",
        "m1,8, 24GB",
    )
    c = load_philly_machines(path)
    assert c.total_gpus == 10
    assert c.nodes[0].gpu_model is KNOWN_GPU_MODELS["K80"]
    assert c.nodes[1].gpu_model == GpuModel("P40", 24 * 1024, 0.5)
    assert (c.nodes[1].cpu_milli, c.nodes[1].memory_mib) == (64000, 512 * 1024)
    c2 = load_philly_machines(path, cpu_milli_per_gpu=1000, memory_mib_per_gpu=10)
    assert (c2.nodes[0].cpu_milli, c2.nodes[0].memory_mib) == (2000, 20)


ITP_HEADER = "job_id,submission_time,duration,num_gpu"


def test_itp_jobs_and_cluster(tmp_path: Path) -> None:
    path = write(
        tmp_path, "cluster07.csv", ITP_HEADER, "a,1000,3600,64", "b,1000,100,1", "c,4600,7200,2"
    )
    jobs = load_itp_jobs(path)
    assert [j.id for j in jobs] == ["a", "b", "c"]
    assert [j.submit for j in jobs] == [0.0, 0.0, 3600.0]
    assert (jobs[0].tasks, jobs[0].task.gpus) == (8, 8)
    assert jobs[0].tenant == "itp/cluster07" and jobs[0].queue == "cluster07"
    assert load_itp_jobs(path, rebase=False)[0].submit == 1000.0
    # GPU-seconds 64*3600 + 100 + 2*7200 = 244,900 over a span of 3,600 s at load 0.8:
    # 85.03 GPUs -> 11 nodes of 8; the largest job needs 8 nodes.
    assert itp_node_count(jobs) == 11
    assert itp_node_count(jobs, target_load=100.0) == 8
    assert itp_node_count(jobs, speed=5.0) == 8  # 17 GPUs at speed 5 -> 3 nodes; largest 8
    c = itp_cluster(jobs)
    assert len(c.nodes) == 11 and c.total_gpus == 88
    assert c.gpu_models == (KNOWN_GPU_MODELS["V100"],)
    assert (c.nodes[0].cpu_milli, c.nodes[0].memory_mib) == (64000, 512 * 1024)
    h = itp_cluster(jobs, 4, nodes=3, gpu_model="H100", name="x")
    assert (len(h.nodes), h.total_gpus, h.nodes[0].name) == (3, 12, "x-000")
    with pytest.raises(SpecError, match="does not fit a node of 4"):
        itp_cluster(jobs, 4)
    with pytest.raises(SpecError, match="unknown GPU model"):
        itp_cluster(jobs, gpu_model="Z80")


def test_itp_duplicate_ids(tmp_path: Path) -> None:
    path = write(tmp_path, "c.csv", ITP_HEADER, "a,1,1,1", "a,2,1,1")
    with pytest.raises(ValueError, match="c.csv:3: column 'job_id': job 'a' appears twice"):
        load_itp_jobs(path)


# ------------------------------------------------------------------------------------------
# PAI 2020, spot 2026, Azure LLM
# ------------------------------------------------------------------------------------------


def test_pai2020_machines(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "pai_machine_spec.csv",
        "machine,gpu_type,cap_cpu,cap_mem,cap_gpu",
        "c,CPU,96,512,0",
        "v,V100M32,96,384,8",
        "m,MISC,96,512,8",
        "p,P100,64,512,2",
    )
    cpu, v, m, p = load_pai2020_machines(path).nodes
    assert (cpu.gpus, cpu.gpu_model, cpu.cpu_milli, cpu.memory_mib) == (0, None, 96000, 512 * 1024)
    assert v.gpu_model is KNOWN_GPU_MODELS["V100M32"] and v.memory_mib == 384 * 1024
    assert m.gpu_model is not None and m.gpu_model.name == "MISC"
    assert p.gpus == 2


def test_spot2026_nodes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "node_info_df.csv",
        "gpu_model,gpu_capacity_num,cpu_num,node_name",
        "GPU-series-1,4,192,0",
        "A100-SXM4-80GB,8,128,3",
    )
    c = load_spot2026_nodes(path)
    s1, a100 = c.nodes
    assert s1.name == "spot-0" and s1.gpu_model is not None
    assert s1.gpu_model.name == "GPU-series-1" and s1.gpu_model.memory_mib == 80 * 1024
    assert a100.gpu_model is KNOWN_GPU_MODELS["A100"]
    assert (a100.cpu_milli, a100.memory_mib) == (128000, 128 * 8 * 1024)
    c2 = load_spot2026_nodes(
        path,
        gpu_models={"GPU-series-1": GpuModel("S1", 1), "A100-SXM4-80GB": GpuModel("A", 2)},
        memory_mib_per_cpu=1,
    )
    assert c2.nodes[0].gpu_model == GpuModel("S1", 1) and c2.nodes[1].memory_mib == 128


def test_azure_llm(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "AzureLLMInferenceTrace_code.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens",
        "2023-11-16 18:17:04.0000000,4000,25",
        "2023-11-16 18:17:03.5000000,8000,50",
        "2023-11-16 18:17:05.2500000,0,0",
    )
    r = load_azure_llm(path)
    assert r.service == "code" and len(r) == 3
    assert r.arrival.tolist() == [0.5, 0.0, 1.75]
    assert r.context_tokens.tolist() == [4000, 8000, 0]
    jobs = r.to_jobs()
    assert [j.id for j in jobs] == ["azure-code-00001", "azure-code-00000", "azure-code-00002"]
    assert [j.runtime for j in jobs] == [4.0, 2.0, 0.0]
    job = jobs[0]
    assert job.priority_class == "online" and job.tenant == "azure-llm/code"
    assert job.task.fractional and job.task.gpu_milli == 250
    other = r.to_jobs(prefill_tokens_per_s=8000, decode_tokens_per_s=50, gpu_milli=1000)
    assert other[0].runtime == 2.0 and not other[0].task.fractional
    with pytest.raises(ValueError, match="gpu_milli must be in 1..1000"):
        r.to_jobs(gpu_milli=0)


def test_azure_llm_cluster() -> None:
    c = azure_llm_cluster()
    assert (len(c.nodes), c.total_gpus, c.gpu_models[0].name) == (1, 8, "H100")
    c2 = azure_llm_cluster(3, 4, GpuModel("X", 1024, 2.0))
    assert (c2.total_gpus, c2.nodes[2].name) == (12, "azure-llm-02")


def test_resolve_gpu_model() -> None:
    assert resolve_gpu_model("A100") is KNOWN_GPU_MODELS["A100"]
    m = GpuModel("Z", 1)
    assert resolve_gpu_model(m) is m
    with pytest.raises(SpecError, match="unknown GPU model 'Z'"):
        resolve_gpu_model("Z")


# ------------------------------------------------------------------------------------------
# philly-users
# ------------------------------------------------------------------------------------------

PHILLY_USERS_HEADER = "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status"


def test_philly_user_jobs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "philly_data_training.csv",
        PHILLY_USERS_HEADER,
        "0,1,1,0,1,0,100,0,Pass",
        "1,2,8,0,4,30,200,0,Failed",
        "2,1,16,0,2,5,50,0,Killed",
    )
    jobs = load_philly_user_jobs(path)
    assert [j.id for j in jobs] == ["philly-user-00000", "philly-user-00001", "philly-user-00002"]
    assert [j.submit for j in jobs] == [0.0, 30.0, 35.0]  # running sum of the intervals
    assert [(j.tasks, j.task.gpus) for j in jobs] == [(1, 1), (4, 2), (2, 8)]  # as they ran
    assert [j.user for j in jobs] == ["u1", "u2", "u1"]
    assert [j.tenant for j in jobs] == ["philly/u1", "philly/u2", "philly/u1"]
    assert {j.queue for j in jobs} == {"philly"} and jobs[1].runtime == 200.0
    # new_status: a recorded fact; the failed job still runs its run_time.
    assert [j.outcome for j in jobs] == ["completed", "failed", "killed"]


def test_philly_user_jobs_status_any_case_and_optional(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.csv",
        PHILLY_USERS_HEADER,
        "0,1,1,0,1,0,100,0,pass",
        "1,2,1,0,1,1,100,0,KILLED",
        "2,3,1,0,1,1,100,0,fAiLeD",
    )
    assert [j.outcome for j in load_philly_user_jobs(path)] == ["completed", "killed", "failed"]
    # Without the column the file still loads, every outcome not recorded.
    bare = write(
        tmp_path, "bare.csv", "u_id,user,gpu_num,node_num,interval,run_time", "0,1,1,1,0,9"
    )
    jobs = load_philly_user_jobs(bare)
    assert [(j.user, j.outcome) for j in jobs] == [("u1", "")]


def test_philly_user_jobs_bad_rows(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.csv",
        PHILLY_USERS_HEADER,
        "0,1,1,0,1,0,100,0,Pass",
        "1,2,3,0,2,10,100,0,Pass",
        "2,3,1,0,1,10,0,0,Pass",
    )
    with pytest.raises(
        TraceFormatError,
        match="p.csv:3: column 'gpu_num': gpu_num 3 does not divide over node_num 2",
    ):
        load_philly_user_jobs(path)
    jobs = load_philly_user_jobs(path, skip_bad_rows=True)
    assert [j.id for j in jobs] == ["philly-user-00000"]
    assert jobs.skipped is not None and jobs.skipped.rows_skipped == 2


def test_philly_user_jobs_bad_status(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "p.csv",
        PHILLY_USERS_HEADER,
        "0,1,1,0,1,0,100,0,Pass",
        "1,2,1,0,1,10,100,0,Done",
        "2,3,1,0,1,10,100,0,",
        "3,4,1,0,1,10,50,0,Killed",
    )
    with pytest.raises(TraceFormatError) as err:
        load_philly_user_jobs(path)
    e = err.value
    assert (e.line, e.column) == (3, "new_status")
    assert str(e) == (
        "p.csv:3: column 'new_status': expected Pass, Failed or Killed (any case), got 'Done'"
    )
    jobs = load_philly_user_jobs(path, skip_bad_rows=True)
    # Nothing else lost: the good rows keep their ids, users, runtimes and outcomes.
    assert [(j.id, j.user, j.runtime, j.outcome) for j in jobs] == [
        ("philly-user-00000", "u1", 100.0, "completed"),
        ("philly-user-00003", "u4", 50.0, "killed"),
    ]
    assert jobs.skipped is not None and jobs.skipped.rows_skipped == 2
    assert jobs.skipped.rows_read == 4
    assert jobs.skipped.by_reason == {"column 'new_status': expected Pass, Failed or Killed": 2}
