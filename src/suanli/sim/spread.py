"""Map one function over independent what-if runs: in this process, on local processes, or
spread over a Ray cluster, with the results in input order whichever it was.

``spread_map(fn, items, shared, workers=N, ray=ADDRESS)`` returns ``[fn(shared, x) for x in
items]``. ``shared`` is what every call reads and none changes (a loaded workload, a cluster),
sent once rather than with every item: once to each local process (its initializer), once
into Ray's object store (``ray.put``). ``fn`` must be a module-level function of an installed
package, and ``shared``, the items and the results must pickle. The runs this is for (the FGD
replays of ``suanli bench fgd``, one policy set of ``suanli simulate``) are deterministic
functions of their arguments, so where they run cannot change a number, nor, since the
results are gathered in input order, the order of the output.

- ``ray=None, workers<=1``: in this process, one item after another (nothing is pickled).
- ``ray=None, workers>1``: a ``ProcessPoolExecutor`` of ``workers`` processes;
  ``chunksize`` consecutive items go to one process at a time (neighbours that share a costly
  setup, such as a variant's pod list, are built once).
- ``ray=ADDRESS``: the driver connects to the running cluster at ``ADDRESS`` (``host:port``
  of its head, the GCS address ``ray start --head`` prints, port 6379 by default;
  ``ray://host:port`` for Ray Client; ``auto`` for the cluster this machine belongs to or
  ``$RAY_ADDRESS``, as inside ``ray job submit``), puts ``shared`` into the object store,
  runs one Ray task (1 CPU) per chunk of ``chunksize`` items, gathers the results in input
  order and disconnects (unless this process was already connected: then that connection is
  used and left open). ``workers`` is ignored: the cluster's CPUs decide how many run at once.

**Every Ray node needs suanli**, the same version as the driver's, and the plugins a run
names (entry points): the tasks call ``fn`` by reference, as ``suanli.bench.fgd.run_one``, and
the workers import it. Install it on every node, or pass ``runtime_env`` (e.g.
``{"pip": ["suanli==X"]}`` or ``{"py_modules": [...]}``), or start the driver with ``ray job
submit --runtime-env-json ... -- suanli bench fgd --ray auto``. A worker that cannot import
suanli ends the map with a :class:`SpreadError` saying so.

**Data travels through the object store, not shared storage**: the callers load their trace
files on the driver and pass what they read as ``shared`` (FGD: the replayable workloads;
variants: the base pod list and node list), so only the driver needs the files and the nodes
need no shared file system; one ``ray.put`` per map, read by every task (numpy arrays without
a copy on the same node).

**Bounded connect**: Ray's own ``ray.init`` keeps retrying an address where no cluster
answers for minutes. Here a TCP connection to the address is tried first (``connect_timeout``
at most, so a wrong host or port fails at once), then ``ray.init`` runs in a helper thread
given ``connect_timeout`` seconds in all; past it (something listens there that is not a Ray
head, or this machine is not a node of that cluster) the map fails with a
:class:`SpreadError`. Ray is imported only when ``ray`` is given; without it installed the
error names ``pip install 'suanli[ray]'``.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

DEFAULT_CONNECT_TIMEOUT_S = 30.0
"""How long connecting to a Ray cluster may take (a healthy local one takes about a second)."""
INSTALL_HINT = "pip install 'suanli[ray]'"
_NO_MODULE = re.compile(r"No module named '[^']+'")


class SpreadError(RuntimeError):
    """The runs could not be spread: Ray missing, its cluster unreachable, or its workers
    unable to import what they were asked to run. The message is one line, for the user."""


def spread_map(
    fn: Callable[[S, T], R],
    items: Sequence[T],
    shared: S = None,  # type: ignore[assignment]
    *,
    workers: int = 1,
    ray: str | None = None,
    chunksize: int = 1,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    runtime_env: dict[str, Any] | None = None,
) -> list[R]:
    """``[fn(shared, x) for x in items]``, computed where the module docstring says."""
    items = list(items)
    if chunksize < 1:
        raise ValueError(f"chunksize must be >= 1, got {chunksize}")
    if ray is not None:
        return _on_ray(fn, items, shared, ray, chunksize, connect_timeout, runtime_env)
    if workers <= 1 or len(items) <= 1:
        return [fn(shared, x) for x in items]
    chunks = _chunks(items, chunksize)
    with ProcessPoolExecutor(
        max_workers=min(workers, len(chunks)), initializer=_install, initargs=(fn, shared)
    ) as pool:
        return [r for done in pool.map(_run_installed, chunks) for r in done]


def where(workers: int, ray: str | None) -> str:
    """Where ``spread_map`` runs, for a report line: ``2 process(es)`` or ``the Ray cluster
    at ADDRESS``."""
    return f"the Ray cluster at {ray}" if ray is not None else f"{max(1, workers)} process(es)"


def _chunks(items: list[T], size: int) -> list[list[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# --- local processes ------------------------------------------------------------------------

_installed: tuple[Callable[[Any, Any], Any], Any] | None = None
"""In a pool's worker process: the function and the shared argument, set once at its start."""


def _install(fn: Callable[[Any, Any], Any], shared: Any) -> None:
    global _installed
    _installed = (fn, shared)


def _run_installed(chunk: list[Any]) -> list[Any]:
    assert _installed is not None, "the pool's initializer did not run"
    fn, shared = _installed
    return [fn(shared, x) for x in chunk]


# --- Ray ------------------------------------------------------------------------------------


def import_ray() -> Any:
    """The ``ray`` module, or a :class:`SpreadError` naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise SpreadError(f"Ray is not installed: {INSTALL_HINT}") from None
    return ray


def check_address(address: str, timeout: float = 5.0) -> None:
    """Fail fast (:class:`SpreadError`) unless Ray is installed and ``address`` has a Ray
    address's form and, for ``host:port`` and ``ray://host:port``, accepts a TCP connection
    within ``timeout`` seconds. ``auto`` is left to Ray (which fails at once where there is
    no cluster)."""
    import_ray()
    text = address.strip()
    if text == "auto":
        return
    rest = text.removeprefix("ray://")
    host, sep, port_text = rest.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise SpreadError(
            f"Ray address {address!r}: expected HOST:PORT (the head's GCS address, port 6379 "
            "by default), ray://HOST:PORT (Ray Client) or auto"
        )
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout):
            pass
    except OSError as e:
        reason = "timed out" if isinstance(e, TimeoutError) else (e.strerror or str(e))
        raise SpreadError(
            f"cannot reach the Ray cluster at {address}: {reason} (is `ray start --head` "
            "running there, and is this its GCS port?)"
        ) from None


@contextmanager
def ray_connection(
    address: str,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
    runtime_env: dict[str, Any] | None = None,
) -> Iterator[Any]:
    """This process connected to the Ray cluster at ``address`` (the ``ray`` module), for the
    block; disconnected after it unless it was connected before. The connect is bounded by
    ``connect_timeout`` seconds (module docstring)."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    check_address(address, timeout=min(5.0, connect_timeout))
    outcome: dict[str, BaseException | None] = {}

    def connect() -> None:
        try:
            ray.init(
                address=address,
                runtime_env=runtime_env,
                log_to_driver=False,  # workers' output would end up in the driver's stdout
                configure_logging=False,
            )
            outcome["error"] = None
        except BaseException as e:  # handed to the waiting thread
            outcome["error"] = e

    helper = threading.Thread(target=connect, name="suanli-ray-connect", daemon=True)
    ray_log = logging.getLogger("ray._private.worker")
    ray_log.addFilter(_not_main_thread_note)
    try:
        helper.start()
        helper.join(connect_timeout)
    finally:
        ray_log.removeFilter(_not_main_thread_note)
    if "error" not in outcome:
        raise SpreadError(
            f"could not connect to the Ray cluster at {address} within {connect_timeout:g} s "
            "(is that the head's GCS address, and is this machine a node of the cluster? "
            "Elsewhere use ray://HOST:10001 or `ray job submit`)"
        )
    if outcome["error"] is not None:
        e = outcome["error"]
        raise SpreadError(f"could not connect to the Ray cluster at {address}: {e}") from e
    try:
        yield ray
    finally:
        ray.shutdown()


def _not_main_thread_note(record: logging.LogRecord) -> bool:
    """Drops Ray's note that ``ray.init`` outside the main thread sets no SIGTERM handler
    (the connect runs in a helper thread on purpose; the default SIGTERM action stays)."""
    return not str(record.msg).startswith("SIGTERM handler is not set")


def _import_failure(error: BaseException) -> str | None:
    """``No module named 'x'`` where a Ray task failed because its worker could not import
    the function or its arguments (Ray reports that as a system error wrapping the
    ``ImportError``'s text), else None."""
    cause: BaseException | None = error
    for _ in range(4):  # a task error, its cause, the system error's own
        if isinstance(cause, ImportError):
            return str(cause)
        found = _NO_MODULE.search(str(cause))
        if found:
            return found.group(0)
        cause = getattr(cause, "cause", None)
        if cause is None:
            break
    return None


def _ray_task(fn: Callable[[Any, Any], Any], shared: Any, chunk: list[Any]) -> list[Any]:
    """One Ray task: ``fn`` over a chunk (``shared`` arrives resolved from the object store)."""
    return [fn(shared, x) for x in chunk]


def _on_ray(
    fn: Callable[[S, T], R],
    items: list[T],
    shared: S,
    address: str,
    chunksize: int,
    connect_timeout: float,
    runtime_env: dict[str, Any] | None,
) -> list[R]:
    if not items:
        return []
    with ray_connection(address, connect_timeout, runtime_env) as ray:
        task = ray.remote(_ray_task)
        shared_ref = ray.put(shared)
        refs = [task.remote(fn, shared_ref, chunk) for chunk in _chunks(items, chunksize)]
        try:
            done = ray.get(refs)
        except ray.exceptions.RayTaskError as e:
            missing = _import_failure(e)
            if missing is not None:
                raise SpreadError(
                    f"a Ray worker could not import what it was asked to run ({missing}): "
                    "every node needs suanli installed, the driver's version (or a runtime_env)"
                ) from None
            raise  # the run's own error, as the class it was raised with
        except ray.exceptions.RayError as e:
            raise SpreadError(f"the Ray cluster at {address} failed the runs: {e}") from e
    return [r for chunk in done for r in chunk]
