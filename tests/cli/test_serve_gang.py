"""A gang through the real server (``suanli serve`` as ``build_server`` builds it, real task
processes, SQLite): every task is told the rendezvous PyTorch's ``env://`` initialisation
reads (``WORLD_SIZE``, ``RANK``, ``LOCAL_WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``) and the tasks really meet there: rank 0 listens on ``MASTER_ADDR:MASTER_PORT``
and the other rank connects to it and sends its rank, as ``torch.distributed``'s TCP store
would. A user's own ``RANK`` does not win, and a task alone is told none of it.

The two tasks hold one GPU each on the server's two declared GPUs (declared, not real: there
is no GPU here; only ``CUDA_VISIBLE_DEVICES`` is looked at).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from serving import PY, Running, logs, start, submit, wait_state
from suanli.backends.base import rendezvous_port
from tasks import RENDEZVOUS_WORKER, told


@pytest.fixture
def srv(tmp_path: Path) -> Any:
    running = start(tmp_path / "state", str(tmp_path / "suanli.db"), gpus=2)
    try:
        yield running
    finally:
        running.stop()


def test_a_gangs_tasks_are_told_their_rendezvous_and_meet_there(srv: Running) -> None:
    with srv.client() as c:
        job = submit(c, command=[PY, "-c", RENDEZVOUS_WORKER], tasks=2, gpus=1, env={"RANK": "9"})
        done = wait_state(c, job, "succeeded", "failed")
        assert done["state"] == "succeeded", done
        out = [logs(c, job, task=t) for t in (0, 1)]
        env = [told(o) for o in out]
        port = str(rendezvous_port(job, 1))
        for rank, e in enumerate(env):
            assert e["WORLD_SIZE"] == "2" and e["RANK"] == str(rank)  # the user's 9 lost
            assert e["LOCAL_WORLD_SIZE"] == "2" and e["LOCAL_RANK"] == str(rank)  # one node
            assert e["MASTER_ADDR"] == "127.0.0.1" and e["MASTER_PORT"] == port
        assert {env[0]["CUDA_VISIBLE_DEVICES"], env[1]["CUDA_VISIBLE_DEVICES"]} == {"0", "1"}
        assert "rank 0 heard from rank 1" in out[0]
        assert "rank 1 reached rank 0" in out[1]
        # A single task is no gang: it is told nothing of the sort.
        solo = submit(c, command=[PY, "-c", "import os; print('RANK' in os.environ)"], gpus=1)
        assert wait_state(c, solo, "succeeded")["state"] == "succeeded"
        assert logs(c, solo).strip() == "False"
