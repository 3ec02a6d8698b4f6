"""Placing a whole job: all of its tasks or none (a gang), compact where it must spread.

1. Count, per node, how many of the job's identical tasks fit now (``fit_counts``).
2. If the cluster cannot take the job's gang minimum, fail with the numbers (``NoCapacity``).
3. If one node can take every task to be started, the placement policy picks that node.
4. Otherwise the placement spreads it (``Placement.spread``; ``suanli.core.spread``: by
   default the fewest nodes, then one NVLink domain, then one rack).
5. Inside each chosen node the policy picks the GPUs, one task at a time, and each task is
   assumed on the view at once (so the next task sees it).
"""

from __future__ import annotations

import numpy as np

from suanli.core.decisions import JobPlacement, NoCapacity
from suanli.core.model import Job, TaskRequest
from suanli.core.seams import Placement
from suanli.core.view import ClusterView, TaskPlacement


def place_job(
    view: ClusterView,
    job: Job,
    policy: Placement,
    rng: np.random.Generator,
    k: np.ndarray | None = None,
) -> tuple[JobPlacement | None, NoCapacity | None, np.ndarray]:
    """Place ``job`` on ``view`` (allocating it) or say why not.

    ``k``, if given, is the per-node count of the job's tasks that fit now (capped at its task
    count), as the scheduler's shape table keeps it; otherwise it is computed here. Returns
    ``(placement, None, k)`` on success and ``(None, reason, k)`` otherwise.
    """
    task = job.task
    if k is None:
        if job.tasks == 1:
            # One task: a boolean mask is all it takes (k is 0 or 1 per node).
            k = view.feasible(task)
        else:
            k = view.fit_counts(task, job.tasks)
    if job.tasks == 1:
        nodes = k.nonzero()[0]
        if not len(nodes):
            return None, no_capacity(view, job, 0, 0), k
        chosen = [(int(nodes[_best(policy.score(view, task, 1, nodes, rng))]), 1)]
        return _allocate(view, task, chosen, policy, rng), None, k

    total = int(k.sum())
    if total < job.min_tasks:
        return None, no_capacity(view, job, total, int(k.max(initial=0))), k
    count = min(job.tasks, total)
    if count == 1:
        nodes = k.nonzero()[0]
        chosen = [(int(nodes[_best(policy.score(view, task, 1, nodes, rng))]), 1)]
    else:
        single = (k >= count).nonzero()[0]
        if len(single):
            best = _best(policy.score(view, task, count, single, rng))
            chosen = [(int(single[best]), count)]
        else:
            nodes = k.nonzero()[0]
            chosen = policy.spread(view, k, count, policy.score(view, task, 1, nodes, rng))

    return _allocate(view, task, chosen, policy, rng), None, k


def _allocate(
    view: ClusterView,
    task: TaskRequest,
    chosen: list[tuple[int, int]],
    policy: Placement,
    rng: np.random.Generator,
) -> JobPlacement:
    """Pick GPUs node by node, task by task, assuming each task on the view at once."""
    tasks: list[TaskPlacement] = []
    for node, n_tasks in chosen:
        for _ in range(n_tasks):
            gpus = policy.pick_gpus(view, node, task, rng)
            tp = view.placement_for(node, gpus, task)
            view.allocate(tp)
            tasks.append(tp)
    return JobPlacement.of(tuple(tasks))


def _best(scores: np.ndarray) -> int:
    # argmin returns the first minimum: ties go to the lowest candidate index.
    return int(scores.argmin())


def no_capacity(view: ClusterView, job: Job, fit_tasks: int, largest_block: int) -> NoCapacity:
    """The reason ``job`` does not fit: its tasks, what the cluster could take, and the most
    whole GPUs free on one node of a model it may use."""
    task = job.task
    free = view.node_full_free
    if task.gpu_models:
        free = free * view.model_ok(task.gpu_models)
    return NoCapacity(
        job.min_tasks, fit_tasks, largest_block, task, int(free.max(initial=0)) if task.gpus else -1
    )
