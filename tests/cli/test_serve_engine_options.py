"""``suanli serve``'s engine options refused where they do not go together, each with what
is wrong, before anything is started."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

import pytest

from suanli.cli.serve import build_server
from suanli.core.model import SpecError


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"engine": "pbs"}, "--backend: local, ray or slurm, got 'pbs'"),
        ({"engine": "slurm"}, "--backend slurm: needs --shared-dir DIR"),
        ({"engine": "slurm", "ray_address": "head:6379"}, "--ray-address is for --backend ray"),
        ({"slurm_python": "/usr/bin/python3"}, "--slurm-python are for --backend slurm"),
        (
            {"engine": "ray", "slurm_partition": "gpu", "ray_address": "head:6379"},
            "--slurm-partition and --slurm-python are for --backend slurm",
        ),
        ({"engine": "slurm", "gpus": 2, "gpu_model": "H100"}, "the Slurm cluster says its nodes"),
    ],
)
def test_engine_options_that_do_not_go_together(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    with pytest.raises(SpecError) as e:
        build_server(tmp_path / "state", **options)  # type: ignore[arg-type]
    assert message in str(e.value)


def test_a_slurm_that_cannot_be_asked_is_refused_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configuration that is not there; one whose controller does not answer (a port
    nothing listens on: the client's connection is refused)."""
    missing = tmp_path / "missing" / "slurm.conf"
    monkeypatch.setenv("SLURM_CONF", str(missing))
    shared = tmp_path / "shared"
    with pytest.raises(SpecError, match=f"SLURM_CONF names {missing}, which is not a file"):
        build_server(tmp_path / "state", engine="slurm", shared_dir=shared)
    if shutil.which("sinfo") is None:
        pytest.skip("Slurm's client commands are not installed (Debian package slurm-client)")
    conf = tmp_path / "slurm.conf"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf.write_text(f"ClusterName=none\nSlurmctldHost=localhost(127.0.0.1)\n"
                    f"SlurmctldPort={port}\nAuthType=auth/none\nCredType=cred/none\n"
                    "NodeName=n1 CPUs=1\nPartitionName=suanli Nodes=n1\n")  # fmt: skip
    monkeypatch.setenv("SLURM_CONF", str(conf))
    with pytest.raises(SpecError, match=r"--backend slurm \(.*\): the Slurm controller does not"):
        build_server(tmp_path / "state", engine="slurm", shared_dir=shared)
