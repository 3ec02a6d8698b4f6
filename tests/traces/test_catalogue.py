"""Finding the trace directory, and the catalogue of traces by name or by file, on small files."""

from __future__ import annotations

from pathlib import Path

import pytest

from suanli.traces import (
    CITATIONS,
    ENV_VAR,
    TraceFormatError,
    TraceNotFoundError,
    TraceUseError,
    UnknownTraceError,
    cluster_names,
    file_kind,
    find_trace_dir,
    resolve_cluster,
    resolve_trace,
    trace_names,
)


def write(path: Path, *lines: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def mini(tmp_path: Path) -> Path:
    """A trace directory laid out as the public one, with a few rows per file."""
    root = tmp_path / "traces"
    write(
        root / "openb" / "openb_node_list_all_node.csv",
        "sn,cpu_milli,memory_mib,gpu,model",
        "n0,32000,262144,0,",
        "n1,96000,393216,8,G2",
    )
    write(
        root / "openb" / "openb_node_list_gpu_node.csv",
        "sn,cpu_milli,memory_mib,gpu,model",
        "n1,96000,393216,8,G2",
    )
    pods = (
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time"
    )
    write(
        root / "openb" / "openb_pod_list_default.csv",
        pods,
        "p0,1000,1024,1,500,,LS,Running,0,10,0",
        "p1,1000,1024,0,0,,BE,Running,5,10,5",
    )
    write(
        root / "openb" / "openb_pod_list_multigpu20.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli",
        "p0,1000,1024,1,500",
    )
    write(
        root / "philly" / "philly_jobs.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster",
        "2017-10-09 07:01:55,66.0,16,1056.0,vc",
    )
    write(
        root / "philly" / "cluster_machine_list.csv",
        "machineId, number of GPUs, single GPU mem",
        "m0,8, 24GB",
        "m1,8, 24GB",
    )
    for i in (1, 4):
        write(
            root / "itp" / f"cluster{i:02d}.csv",
            "job_id,submission_time,duration,num_gpu",
            "a,0,100,8",
            "b,100,100,1",
        )
    write(
        root / "azure-llm-2023" / "AzureLLMInferenceTrace_code.csv",
        "TIMESTAMP,ContextTokens,GeneratedTokens",
        "2023-11-16 18:17:03.9799600,4808,10",
    )
    write(
        root / "pai2020" / "pai_machine_spec.csv",
        "machine,gpu_type,cap_cpu,cap_mem,cap_gpu",
        "m,T4,96,512,2",
    )
    write(
        root / "alibaba-spot-2026" / "node_info_df.csv",
        "gpu_model,gpu_capacity_num,cpu_num,node_name",
        "A10,1,128,2",
    )
    return root


def test_find_trace_dir_explicit_and_env(
    mini: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert find_trace_dir(mini) == mini.resolve()
    assert find_trace_dir(str(mini)) == mini.resolve()
    with pytest.raises(TraceNotFoundError, match="the path given"):
        find_trace_dir(tmp_path / "nowhere")
    monkeypatch.setenv(ENV_VAR, str(mini))
    assert find_trace_dir() == mini.resolve()
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "nowhere"))
    with pytest.raises(TraceNotFoundError, match=r"\$SUANLI_TRACE_DIR"):
        find_trace_dir()


def test_find_trace_dir_relative_to_cwd(
    mini: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    (tmp_path / "shared").mkdir()
    mini.rename(tmp_path / "shared" / "traces")
    (tmp_path / "checkout").mkdir()
    monkeypatch.chdir(tmp_path / "checkout")
    assert find_trace_dir() == (tmp_path / "shared" / "traces").resolve()


def test_find_trace_dir_names_the_places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    import suanli.traces.locate as locate

    monkeypatch.setattr(locate, "_repository_root", lambda start: tmp_path / "repo")
    with pytest.raises(TraceNotFoundError) as info:
        find_trace_dir()
    text = str(info.value)
    assert "SUANLI_TRACE_DIR" in text and "the current directory" in text
    assert "the repository root" in text and str(tmp_path / "shared" / "traces") in text
    assert [why for why, _ in info.value.places] == [
        "$SUANLI_TRACE_DIR",
        "the current directory",
        "the repository root",
    ]


def test_resolve_trace_by_name(mini: Path) -> None:
    t = resolve_trace("openb", mini)
    assert t.spec == "openb:default" and len(t.jobs) == 2 and t.cluster.total_gpus == 8
    assert t.source == CITATIONS["openb"] and t.skipped is None
    assert [p.name for p in t.files] == [
        "openb_pod_list_default.csv",
        "openb_node_list_all_node.csv",
    ]
    p = resolve_trace("Philly", mini)
    assert (len(p.jobs), p.jobs[0].tasks, p.cluster.total_gpus) == (1, 2, 16)
    i = resolve_trace("itp:4", mini)
    assert i.spec == "itp:cluster04" and i.cluster.name == "itp-cluster04"
    assert resolve_trace("itp:cluster01", mini).spec == "itp:cluster01"
    a = resolve_trace("azure-llm:code", mini)
    assert a.jobs[0].priority_class == "online" and a.cluster.total_gpus == 8
    skipped = resolve_trace("openb", mini, skip_bad_rows=True).skipped
    assert skipped is not None and skipped.rows_skipped == 0 and skipped.rows_read == 4


def test_resolve_trace_errors(mini: Path) -> None:
    with pytest.raises(UnknownTraceError) as info:
        resolve_trace("alibaba", mini)
    assert "philly" in info.value.known and "known: openb" in str(info.value)
    for spec, message in [
        ("itp", "itp needs one of its ten clusters"),
        ("itp:11", "unknown ITP cluster '11'"),
        ("azure-llm", "azure-llm needs a service"),
        ("openb:nope", "unknown openb pod list"),
        ("philly:x", "philly has no variant"),
    ]:
        with pytest.raises(UnknownTraceError, match=message):
            resolve_trace(spec, mini)
    with pytest.raises(ValueError, match="openb:multigpu20 has no creation or deletion times"):
        resolve_trace("openb:multigpu20", mini)
    with pytest.raises(TraceNotFoundError):
        resolve_trace("philly", mini / "missing")
    with pytest.raises(TraceUseError, match="trace file not found"):
        resolve_trace(str(mini / "none.csv"), mini)


def test_resolve_trace_by_file(mini: Path, tmp_path: Path) -> None:
    assert file_kind(mini / "philly" / "philly_jobs.csv") == "philly-jobs"
    assert file_kind(mini / "philly" / "cluster_machine_list.csv") == "philly-machines"
    assert file_kind(mini / "pai2020" / "pai_machine_spec.csv") == "pai2020-machines"
    # A copy elsewhere, renamed: recognised from the header; machines from the trace dir.
    jobs = tmp_path / "elsewhere" / "mine.csv"
    write(jobs, "timestamp,duration,num_gpus,gpu_time,cluster", "2017-10-09 07:01:55,6,1,6,v")
    t = resolve_trace(str(jobs), mini)
    assert t.spec == str(jobs) and len(t.jobs) == 1 and t.cluster.total_gpus == 16
    assert t.source == CITATIONS["philly"]
    # The machine list beside the file wins over the trace directory's.
    write(
        jobs.parent / "cluster_machine_list.csv",
        "machineId, number of GPUs, single GPU mem",
        "x,2, 12GB",
    )
    assert resolve_trace(str(jobs), mini).cluster.total_gpus == 2
    pods = resolve_trace(str(mini / "openb" / "openb_pod_list_default.csv"))
    assert pods.cluster.total_gpus == 8
    itp = resolve_trace(str(mini / "itp" / "cluster01.csv"))
    assert itp.jobs[0].tenant == "itp/cluster01"
    with pytest.raises(ValueError, match="is a machine list"):
        resolve_trace(str(mini / "pai2020" / "pai_machine_spec.csv"))
    with pytest.raises(ValueError, match="has no creation or deletion times"):
        resolve_trace(str(mini / "openb" / "openb_pod_list_multigpu20.csv"))
    other = write(tmp_path / "x.csv", "a,b,c", "1,2,3")
    with pytest.raises(TraceFormatError, match="matches no known trace format"):
        resolve_trace(str(other))


def test_resolve_trace_philly_users_by_file(mini: Path, tmp_path: Path) -> None:
    """A Gen-Parallel-Workloads CSV by path: recognised by its header, users as tenants, the
    recorded outcomes kept; the Philly machines from the trace directory."""
    path = write(
        tmp_path / "mine" / "training.csv",
        "u_id,user,gpu_num,cpu_num,node_num,interval,run_time,wall_time,new_status",
        "7,12,8,0,2,0,100,0,Pass",
        "8,3,1,0,1,60,30,0,Killed",
        "9,12,2,0,1,5,40,0,Failed",
    )
    assert file_kind(path) == "philly-user-jobs"
    t = resolve_trace(str(path), mini)
    assert t.spec == str(path) and t.source == CITATIONS["philly-users"]
    assert t.cluster.total_gpus == 16
    assert [(j.id, j.user, j.tenant, j.outcome) for j in t.jobs] == [
        ("philly-user-00007", "u12", "philly/u12", "completed"),
        ("philly-user-00008", "u3", "philly/u3", "killed"),
        ("philly-user-00009", "u12", "philly/u12", "failed"),
    ]
    assert [j.submit for j in t.jobs] == [0.0, 60.0, 65.0]
    assert [j.runtime for j in t.jobs] == [100.0, 30.0, 40.0]  # killed or failed: as recorded


def test_resolve_cluster(mini: Path) -> None:
    assert resolve_cluster("openb", mini).total_gpus == 8
    assert len(resolve_cluster("openb-gpu", mini).nodes) == 1
    assert resolve_cluster("philly", mini).name == "philly"
    assert resolve_cluster("PAI2020", mini).total_gpus == 2
    assert resolve_cluster("spot2026", mini).nodes[0].name == "spot-2"
    assert resolve_cluster("itp:cluster04", mini).name == "itp-cluster04"
    assert resolve_cluster("azure-llm").total_gpus == 8
    by_file = resolve_cluster(str(mini / "pai2020" / "pai_machine_spec.csv"))
    assert by_file.name == "pai_machine_spec" and by_file.total_gpus == 2
    with pytest.raises(UnknownTraceError, match="unknown cluster 'dgx'; known: openb, openb-gpu"):
        resolve_cluster("dgx", mini)
    with pytest.raises(ValueError, match="holds jobs"):
        resolve_cluster(str(mini / "philly" / "philly_jobs.csv"))


def test_names() -> None:
    assert "openb:gpushare40" in trace_names() and "itp:cluster10" in trace_names()
    assert "azure-llm:conv" in trace_names()
    assert set(cluster_names()) >= {"openb", "openb-gpu", "philly", "pai2020", "spot2026"}
    assert set(CITATIONS) == {
        "openb", "philly", "philly-users", "itp", "pai2020", "spot2026", "azure-llm"
    }  # fmt: skip
    assert "philly-users" in trace_names()
