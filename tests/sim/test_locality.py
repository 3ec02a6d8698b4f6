"""admission/locality in the simulator: a gang that no NVLink domain can hold now waits for
one up to its wait, then takes whatever fits; it never waits for a level that could never
hold it, nor when one node or one domain holds it now."""

from __future__ import annotations

import pytest

from builders import cluster, node
from suanli.core.admission.locality import LocalityAdmission
from suanli.core.model import Job, KeyPathError, TaskRequest
from suanli.sim.engine import PolicySet, simulate

BEST_FIT = PolicySet.parse("fifo+best-fit")  # ties to the lowest index: a on n0, b on n1


def two_domains():  # type: ignore[no-untyped-def]
    """n0, n2 in domain (and rack) 0; n1, n3 in domain 1."""
    return cluster(*(node(f"n{i}", 8, domain=f"d{i % 2}", rack=f"r{i % 2}") for i in range(4)))


def j(id: str, submit: float, runtime: float, gpus: int = 8, tasks: int = 1) -> Job:
    return Job(id, submit, runtime, TaskRequest(gpus=gpus), tasks=tasks)


def starts(jobs, wait=None, spec=None):  # type: ignore[no-untyped-def]
    adm = {"locality": {"max_wait_s": wait}} if wait is not None else None
    r = simulate(spec or two_domains(), jobs, BEST_FIT, admission=adm, explain=["g"])
    return {i: float(s) for i, s in zip(r.records.ids, r.records.start, strict=True)}, r


# One node busy in each domain (a until 1000, b until 5000): the 2-node gang finds one free
# node in each domain.
BUSY = [j("a", 0, 1000), j("b", 0, 5000)]


def test_a_gang_waits_for_one_domain_then_starts_there() -> None:
    got, _ = starts([*BUSY, j("g", 10, 100, tasks=2)])
    assert got["g"] == 10  # no wait: it spreads over the two domains at once
    got, r = starts([*BUSY, j("g", 10, 100, tasks=2)], wait=3600)
    assert got["g"] == 1000  # a ends and frees a whole domain, within the hour
    assert r.records.nodes[2] == 2
    assert "waiting for one NVLink domain" in str(r.records.waited.get(2, ""))


def test_it_takes_whatever_fits_when_its_wait_ends() -> None:
    got, _ = starts([j("a", 0, 9000), j("b", 0, 9000), j("g", 10, 100, tasks=2)], wait=300)
    assert got["g"] == 310  # no domain frees before 310 s: it spreads then


def test_no_wait_for_a_level_that_can_never_hold_it_or_when_one_holds_it_now() -> None:
    # Three nodes' worth: no domain (16 GPUs) could ever hold it, one rack could not either.
    got, _ = starts([j("g", 0, 100, tasks=3)], wait=3600)
    assert got["g"] == 0
    # An empty domain holds the 2-node gang now: no wait.
    got, _ = starts([j("a", 0, 1000), j("g", 10, 100, tasks=2)], wait=3600)
    assert got["g"] == 10


@pytest.mark.parametrize(
    "config, says",
    [({"max_wait_s": -1}, "max_wait_s: must be a number of seconds >= 0"),
     ({"max_wait_s": "1h"}, "max_wait_s: must be a number"), ({"wait": 3}, "unknown key"),
     ([300], "must be a mapping")],
)  # fmt: skip
def test_bad_configs_are_refused(config, says) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KeyPathError, match=says):
        LocalityAdmission(config)


def test_the_quota_files_admission_section_configures_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from suanli.cli.main import app as cli
    from support import cli_runner

    q = tmp_path / "q.yaml"
    body = "queues:\n  - name: default\n    nominal: {gpu: 64}\nadmission:\n  locality:\n"
    args = ["simulate", "-c", "8x8xH100[nvlink=16]", "-n", "100", "-p", "fifo+topology",
            "--quotas", str(q), "--json"]  # fmt: skip
    q.write_text(body + "    max_wait_s: 900\n")
    ok = cli_runner().invoke(cli, args)
    assert ok.exit_code == 0, ok.output
    q.write_text(body + "    max_wait_s: -5\n")
    bad = cli_runner().invoke(cli, args)
    assert bad.exit_code == 2
    assert "admission.locality.max_wait_s: must be a number of seconds >= 0, got -5" in bad.output
