"""FakeBackend: deterministic ends, ordering, stops, timeouts and adoption, all by the clock."""

from __future__ import annotations

import pytest

from suanli.backends import Backend, Exit, FakeBackend, Launch, Outcome


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def spec(job: str, task: int = 0, runtime: float | None = None, **kw: object) -> Launch:
    env = (("SUANLI_FAKE_RUNTIME_S", str(runtime)),) if runtime is not None else ()
    fields: dict[str, object] = {
        "job_id": job,
        "attempt": 1,
        "task": task,
        "command": ("train",),
        "env": env,
    }
    fields.update(kw)
    return Launch(**fields)  # type: ignore[arg-type]


def summary(exits: list[Exit]) -> list[tuple[str, int, str, float]]:
    return [(e.handle.job_id, e.handle.task, e.outcome.value, e.finished_at) for e in exits]


def scenario() -> list[list[tuple[str, int, str, float]]]:
    clock = Clock()
    b = FakeBackend(clock)
    b.launch(spec("b", 0, runtime=10))
    b.launch(spec("a", 1, runtime=10))
    b.launch(spec("a", 0, runtime=10))
    b.launch(spec("c", 0, runtime=3))
    forever = b.launch(spec("d", 0))
    out = [b.poll()]
    clock.now = 105.0
    out.append(b.poll())
    b.stop(forever, Outcome.PREEMPTED)
    clock.now = 150.0  # polled late: finished_at is still the exact end time
    out.append(b.poll())
    out.append(b.poll())
    return [summary(x) for x in out]


def test_ends_are_deterministic_and_ordered() -> None:
    first = scenario()
    assert first == scenario()
    assert first == [
        [],
        [("c", 0, "succeeded", 103.0)],
        [
            ("d", 0, "preempted", 105.0),
            ("a", 0, "succeeded", 110.0),
            ("a", 1, "succeeded", 110.0),
            ("b", 0, "succeeded", 110.0),
        ],
        [],
    ]


def test_launched_records_every_launch_and_pids_are_counters() -> None:
    b = FakeBackend(Clock())
    s1, s2 = spec("x", 0, runtime=1), spec("x", 1, runtime=1)
    h1, h2 = b.launch(s1), b.launch(s2)
    assert b.launched == [s1, s2]
    assert (h1.pid, h2.pid) == (1, 2)
    assert b.running() == [h1, h2]
    assert isinstance(b, Backend)
    with pytest.raises(FileExistsError):
        b.launch(s1)


def test_max_runtime_times_out() -> None:
    clock = Clock()
    b = FakeBackend(clock)
    b.launch(spec("long", runtime=10, max_runtime_s=5))
    b.launch(spec("exact", runtime=5, max_runtime_s=5))
    b.launch(spec("forever", max_runtime_s=7))
    clock.now = 200.0
    got = {e.handle.job_id: e for e in b.poll()}
    assert got["long"].outcome is Outcome.TIMED_OUT and got["long"].finished_at == 105.0
    assert got["long"].exit_code is None and "max runtime 5 s" in got["long"].detail
    assert got["exact"].outcome is Outcome.SUCCEEDED and got["exact"].exit_code == 0
    assert got["forever"].outcome is Outcome.TIMED_OUT and got["forever"].finished_at == 107.0


def test_stop() -> None:
    clock = Clock()
    b = FakeBackend(clock)
    running = b.launch(spec("run"))
    done = b.launch(spec("done", runtime=1))
    clock.now = 102.0
    b.stop(running, Outcome.CANCELLED)
    b.stop(running, Outcome.PREEMPTED)  # first request wins
    b.stop(done, Outcome.CANCELLED)  # already ended (not yet polled): no-op
    clock.now = 103.0
    got = {e.handle.job_id: e for e in b.poll()}
    assert got["run"].outcome is Outcome.CANCELLED and got["run"].finished_at == 102.0
    assert got["done"].outcome is Outcome.SUCCEEDED and got["done"].finished_at == 101.0
    b.stop(running, Outcome.CANCELLED)  # after the end: no-op, nothing more reported
    assert b.poll() == [] and b.running() == []
    with pytest.raises(ValueError, match="outcome"):
        b.stop(running, Outcome.SUCCEEDED)


def test_adopt_after_restart() -> None:
    clock = Clock()
    b = FakeBackend(clock)
    alive = b.launch(spec("alive", runtime=50))
    ends = b.launch(spec("ends", runtime=5))
    reported = b.launch(spec("reported", runtime=1))
    clock.now = 101.0
    assert summary(b.poll()) == [("reported", 0, "succeeded", 101.0)]
    b.restart()
    assert b.running() == []
    clock.now = 110.0
    assert b.poll() == []  # nothing is tracked until adopted
    unknown = type(alive)("ghost", 1, 0, 99, 99, "fake/ghost/1/0")
    got = {e.handle.job_id: e for e in b.adopt([alive, ends, reported, unknown])}
    assert set(got) == {"ends", "reported", "ghost"}
    assert got["ends"].outcome is Outcome.SUCCEEDED and got["ends"].finished_at == 105.0
    assert got["ghost"].outcome is Outcome.LOST and got["ghost"].finished_at == 110.0
    assert b.running() == [alive]
    assert b.adopt([alive]) == []
    clock.now = 160.0
    assert summary(b.poll()) == [("alive", 0, "succeeded", 150.0)]
    assert ends in [e.handle for e in got.values()]


def test_bad_declared_runtime() -> None:
    b = FakeBackend(Clock())
    with pytest.raises(ValueError, match="SUANLI_FAKE_RUNTIME_S"):
        b.launch(spec("x", env=(("SUANLI_FAKE_RUNTIME_S", "soon"),)))
    with pytest.raises(ValueError, match="SUANLI_FAKE_RUNTIME_S"):
        b.launch(spec("x", env=(("SUANLI_FAKE_RUNTIME_S", "-1"),)))
    assert b.launched == []
