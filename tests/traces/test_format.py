"""Trace readers: file format checks, error messages and skip reports, on small files."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from suanli.traces import (
    MissingColumnsError,
    SkipReport,
    TraceFormatError,
    load_azure_llm,
    load_itp_jobs,
    load_openb_nodes,
    load_openb_pods,
    load_pai2020_machines,
    load_philly_jobs,
    load_philly_machines,
    load_spot2026_nodes,
)
from suanli.traces.table import TimestampParser, parse_float, parse_int

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)


def write(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def pod(i: int, gpu_milli: str = "500", num_gpu: str = "1") -> str:
    return f"pod-{i},4000,8192,{num_gpu},{gpu_milli},,LS,Running,{i * 10},{i * 10 + 100},{i * 10}"


def test_bad_integer_names_file_line_and_column(tmp_path: Path) -> None:
    rows = [pod(i) for i in range(20)]
    rows[15] = pod(15, gpu_milli="abc")  # line 17: header is line 1
    path = write(tmp_path, "openb_pod_list_default.csv", POD_HEADER, *rows)
    with pytest.raises(TraceFormatError) as info:
        load_openb_pods(path)
    err = info.value
    assert str(err) == (
        "openb_pod_list_default.csv:17: column 'gpu_milli': "
        "expected an integer in 0..1000, got 'abc'"
    )
    assert (err.file, err.line, err.column) == (path, 17, "gpu_milli")
    assert isinstance(err, ValueError)


def test_out_of_range_integer(tmp_path: Path) -> None:
    path = write(tmp_path, "pods.csv", POD_HEADER, pod(0), pod(1, gpu_milli="1001"))
    with pytest.raises(TraceFormatError, match=r"pods.csv:3: column 'gpu_milli': .*got '1001'"):
        load_openb_pods(path)


def test_missing_columns_are_all_named(tmp_path: Path) -> None:
    path = write(tmp_path, "jobs.csv", "timestamp,num_gpus,gpu_time", "2017-10-01 00:00:00,1,5")
    with pytest.raises(MissingColumnsError) as info:
        load_philly_jobs(path)
    assert info.value.missing == ("duration", "cluster")
    assert info.value.line == 1
    assert "missing columns 'duration', 'cluster'" in str(info.value)


def test_openb_times_come_as_a_pair(tmp_path: Path) -> None:
    path = write(tmp_path, "p.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time")
    with pytest.raises(MissingColumnsError, match="deletion_time"):
        load_openb_pods(path)


def test_wrong_column_count(tmp_path: Path) -> None:
    path = write(tmp_path, "n.csv", "sn,cpu_milli,memory_mib,gpu,model", "a,1,1,0,", "b,1,1,0")
    with pytest.raises(TraceFormatError, match=r"n.csv:3: expected 5 columns, got 4"):
        load_openb_nodes(path)


def test_bad_date(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "philly_jobs.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster",
        "2017-10-09 07:01:55,66.0,1,66.0,vc1",
        "2017-02-30 07:01:55,66.0,1,66.0,vc1",
    )
    with pytest.raises(TraceFormatError) as info:
        load_philly_jobs(path)
    assert info.value.line == 3
    assert info.value.column == "timestamp"
    assert "got '2017-02-30 07:01:55'" in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "2017-10-09",
        "2017-10-09 24:00:00",
        "2017-10-09 07:60:00",
        "2017-10-09 07:01:5",
        "2017/10/09 07:01:55",
        "2017-10-09 07:01:55.",
        "2017-10-09 07:01:55.5x",
        "2017-10-09 07:+1:55",
        "",
    ],
)
def test_timestamp_parser_rejects(text: str) -> None:
    with pytest.raises(Exception, match="expected a timestamp"):
        TimestampParser()(text, "t")


def test_timestamp_parser_values() -> None:
    p = TimestampParser()
    assert p("1970-01-02 00:00:01", "t") == 86401.0
    assert p("2017-10-09T07:01:55", "t") == p("2017-10-09 07:01:55", "t")
    assert p("2023-11-16 18:17:03.9799600", "t") - p("2023-11-16 18:17:03", "t") == (
        pytest.approx(0.97996)
    )


def test_number_parsers() -> None:
    assert parse_int("7", "c", 1, 8) == 7
    assert parse_float("66.0", "c", 0.0, above=True) == 66.0
    for bad in ("nan", "inf", "0", "-1", "x"):
        with pytest.raises(Exception, match="expected a number > 0"):
            parse_float(bad, "c", 0.0, above=True)


def test_skip_bad_rows_counts_by_reason(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "philly_jobs.csv",
        "timestamp,duration,num_gpus,gpu_time,cluster",
        "2017-10-09 07:00:00,10.0,1,10.0,vc1",
        "2017-10-09 07:00:01,0.0,1,0.0,vc1",  # zero duration
        "2017-10-09 07:00:02,10.0,0,0.0,vc1",  # zero GPUs
        "2017-10-09 07:00:03,-5,2,-10.0,vc2",  # negative duration
        "2017-10-09 07:00:04,10.0,2",  # short row
        "not a date,10.0,2,20.0,vc2",
        "2017-10-09 07:00:06,10.0,2,20.0,vc2",
        "",
    )
    with pytest.raises(TraceFormatError, match=":3: column 'duration'"):
        load_philly_jobs(path)
    jobs = load_philly_jobs(path, skip_bad_rows=True)
    assert [j.id for j in jobs] == ["philly-00001", "philly-00007"]
    report = jobs.skipped
    assert report is not None
    assert report.rows_skipped == 5
    assert report.rows_read == 7
    assert report.by_reason == {
        "column 'duration': expected a number > 0": 2,
        "column 'num_gpus': expected an integer >= 1": 1,
        "wrong number of columns": 1,
        "column 'timestamp': expected a timestamp YYYY-MM-DD HH:MM:SS[.fraction]": 1,
    }
    assert [e.line for e in report.examples] == [3, 4, 5, 6, 7]
    text = str(report)
    assert "read 7 rows, skipped 5" in text and "philly_jobs.csv:3:" in text


def test_skip_report_keeps_the_first_examples_only(tmp_path: Path) -> None:
    rows = [f"n{i},1,1,x,A10" for i in range(12)]
    path = write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model", "ok,1,1,1,A10", *rows)
    cluster = load_openb_nodes(path, skip_bad_rows=True)
    assert [n.name for n in cluster.nodes] == ["ok"]
    report = cluster.skipped
    assert report is not None
    assert report.rows_skipped == 12 and len(report.examples) == 5
    assert [e.line for e in report.examples] == [3, 4, 5, 6, 7]
    assert "... and 7 more" in str(report)


def test_no_report_without_skip_and_empty_report_when_clean(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes.csv", "sn,cpu_milli,memory_mib,gpu,model", "a,1,1,2,T4")
    assert load_openb_nodes(path).skipped is None
    report = load_openb_nodes(path, skip_bad_rows=True).skipped
    assert report is not None and report.rows_skipped == 0 and report.rows_read == 1
    assert "skipped none" in str(report)


def test_skip_report_combine() -> None:
    a = SkipReport(files=("a.csv",), rows_read=10)
    a.add(TraceFormatError("a.csv", 2, "bad", column="x", reason="r"))
    b = SkipReport(files=("b.csv",), rows_read=5)
    b.add(TraceFormatError("b.csv", 3, "bad", column="x", reason="r"))
    both = SkipReport.combine([a, None, b])
    assert both is not None
    assert both.files == ("a.csv", "b.csv")
    assert (both.rows_read, both.rows_skipped) == (15, 2)
    assert both.by_reason == {"column 'x': r": 2}
    assert SkipReport.combine([None, None]) is None


def test_errors_pickle() -> None:
    err = TraceFormatError("dir/f.csv", 4, "expected x, got 'y'", column="c", reason="expected x")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) == "f.csv:4: column 'c': expected x, got 'y'"
    missing = pickle.loads(pickle.dumps(MissingColumnsError("f.csv", ["a"], ["b"])))
    assert missing.missing == ("a",)


def test_empty_file_and_duplicate_header(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="empty header"):
        load_pai2020_machines(write(tmp_path, "empty.csv", ""))
    dup = write(tmp_path, "dup.csv", "machine,gpu_type,cap_cpu,cap_mem,cap_gpu,cap_cpu")
    with pytest.raises(TraceFormatError, match="'cap_cpu' appears twice"):
        load_pai2020_machines(dup)


def test_blank_lines_are_not_rows(tmp_path: Path) -> None:
    path = write(tmp_path, "c.csv", "job_id,submission_time,duration,num_gpu", "", "a,5,10,1", "")
    jobs = load_itp_jobs(path, skip_bad_rows=True)
    assert len(jobs) == 1
    assert jobs.skipped is not None and jobs.skipped.rows_skipped == 0


READER_CASES = [
    (
        load_philly_machines,
        "machineId, number of GPUs, single GPU mem",
        "m0, 2, 12GB",
        "m1, 2, 16GB",
    ),
    (
        load_pai2020_machines,
        "machine,gpu_type,cap_cpu,cap_mem,cap_gpu",
        "a,T4,96,512,2",
        "b,CPU,96,512,8",
    ),
    (
        load_spot2026_nodes,
        "gpu_model,gpu_capacity_num,cpu_num,node_name",
        "A10,1,128,0",
        "X9,8,128,1",
    ),
    (load_openb_nodes, "sn,cpu_milli,memory_mib,gpu,model", "a,1,1,2,T4", "b,1,1,2,"),
    (load_itp_jobs, "job_id,submission_time,duration,num_gpu", "a,5,10,1", "b,5,0,1"),
    (
        load_philly_jobs,
        "timestamp,duration,num_gpus,cluster",
        "2017-10-09 07:01:55,1,1,v",
        "2017-10-09 07:01:55,1,x,v",
    ),
    (
        load_azure_llm,
        "TIMESTAMP,ContextTokens,GeneratedTokens",
        "2023-11-16 18:17:03.1,3,5",
        "2023-11-16 18:17:03,-1,5",
    ),
    (load_openb_pods, POD_HEADER, pod(0), pod(1, num_gpu="2", gpu_milli="500")),
]


@pytest.mark.parametrize(("load", "header", "good", "bad"), READER_CASES)
def test_every_reader_raises_or_reports(
    tmp_path: Path, load: Callable[..., Any], header: str, good: str, bad: str
) -> None:
    path = write(tmp_path, "f.csv", header, good, bad)
    with pytest.raises(TraceFormatError, match=r"^f.csv:3: column '"):
        load(path)
    result = load(path, skip_bad_rows=True)
    assert len(getattr(result, "nodes", result)) == 1
    assert result.skipped.rows_skipped == 1
    assert result.skipped.examples[0].line == 3


def test_cluster_of_only_bad_rows_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "n.csv", "sn,cpu_milli,memory_mib,gpu,model", "a,1,1,1,XYZ")
    with pytest.raises(ValueError, match="has no nodes"):
        load_openb_nodes(path, skip_bad_rows=True)
