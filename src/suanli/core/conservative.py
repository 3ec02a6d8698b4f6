"""Conservative backfill: a reservation for every pending job up to a depth.

Mu'alem and Feitelson's "conservative" backfilling (IEEE TPDS 2001), bounded the way Slurm's
backfill plugin bounds it (``bf_max_job_test``, 100 jobs by default). The plan is made on a
*profile* of the cluster's future free capacity: the view now, then running jobs ending at
their estimates (``Job.estimate``, else ``DEFAULT_ESTIMATE``; a job past its estimate is
expected to end at once; ``oracle``: ``Job.runtime``, a reference only). The first ``depth``
pending jobs (the *window*) are taken in queue order (the static order of
``QueueOrder.key``):

* a job whose whole expected run fits on the profile from now on starts now. What earlier
  reservations hold before its run would end is taken off the view for its placement (a
  what-if, undone at once), so the placement policy picks nodes and GPUs among the rest and
  no earlier reservation moves;
* any other gets a reservation at the earliest time its whole run fits on the profile, on
  nodes (and tasks per node) counted with the view's fit rules: one node if one can hold
  every task (the least roomy such node, ties to the lowest index), else the roomiest first;
  GPUs as the default ``Placement.pick_gpus`` takes them (whole GPUs lowest index first, a
  share on the fullest GPU it fits). It holds them for its expected run.

A window is judged on the element-wise minimum of the free capacity over its time, per GPU:
a job fits if the same GPUs (and CPU and memory) are free throughout, which is what running
there needs. A job may start ahead of an earlier job of its own lane (same shape and queue;
elsewhere in the scheduler a lane starts in queue order), as conservative backfill lets a
short job pass a long one. Jobs whose queue's quota holds them back get no reservation (they
wait for quota, not capacity). Beyond the window a job (the head of its lane) may start only
if its whole expected run fits around every reservation; it gets none of its own. A job that
fits now but would touch a reservation is skipped with ``BehindReservation(job, until)``
naming the reservation that starts first among those it would touch; a lane's first waiting
job says why, once per change of reason.

What holds: with true runtimes (``-oracle``) no reserved job starts later than its first
reservation, when jobs start with all their tasks on GPUs of speed 1 and the placement takes
GPUs inside a node as the plan does (best-fit; first-fit for whole GPUs). A placement that
picks other GPUs (random, worst-fit, FGD) may take GPUs a later job's reservation counted on;
that reservation then moves when the plan is made again. With preemption, a job that evicts
others is placed without regard to reservations.

When it is planned: afresh at a cycle after capacity changed on the view (a job ended or
started), running jobs were evicted, a job joined or left the window other than at its end,
or time passed a moment the plan counted on; a job that joins at the end is planned for on
top of the plan as it is. Otherwise the plan stands: nothing it rests on moved (a property
test holds the two to the same decisions, with true runtimes).
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from suanli.core.backfill import RunningByEnd, duration, estimated_end, node_count, task_params
from suanli.core.decisions import Admit, BehindReservation, Decision, Skip
from suanli.core.model import MILLI, Job, TaskRequest
from suanli.core.preemption import Running
from suanli.core.view import ClusterView, TaskPlacement

if TYPE_CHECKING:
    from suanli.core.scheduler import Scheduler, _Shape

# The profile, node by node: piece 0 is the view now; then one piece per distinct time at
# which something on the node changes (a running job ends, a reservation starts or stops
# holding what it reserved). Arrays travel to the compiled code in three tuples:
#
# P, the pieces: ``p_n[x]`` pieces on node ``x``; piece ``a`` starts at ``p_time[x, a]`` and
#    has free per-GPU share and memory ``p_fm``/``p_gm[x, a]``, CPU and memory ``p_cpu``/
#    ``p_mem[x, a]``, ``p_full[x, a]`` fully free GPUs, and (nodes of up to 64 GPU slots)
#    ``p_mask[x, a]`` their bits.
# E, the events, in a pool linked per node (``n_first[x]``, ``e_next``): at ``e_time`` node
#    ``e_node`` gets ``e_sign`` times the per-GPU share and memory, CPU and memory back;
#    ``e_res`` is the reservation holding it (-1: a running job's end).
# C, a cache: ``ic[s, x, a]``, how many tasks of window shape ``s`` piece ``a`` of node ``x``
#    holds on its own (fractional shapes only; valid where ``ic_ok[s, x]``).
#
# A node's pieces are rebuilt from its events when they change. A window is judged on the
# element-wise minimum of the pieces it overlaps; a piece's own count bounds any window
# through it, which prunes most windows before they are counted.

_DONE, _START, _GROW_PIECES, _GROW_EVENTS, _GROW_RESERVATIONS = 0, 1, 2, 3, 4
_NO_STATUS, _NO_FIT, _HELD_BACK = 0, 1, 2


@njit(cache=True, nogil=True)
def _link(ne, E):  # type: ignore[no-untyped-def]
    e_node, e_next, n_first = E[1], E[8], E[9]
    n_first[:] = -1
    for e in range(ne):
        x = e_node[e]
        e_next[e] = n_first[x]
        n_first[x] = e


@njit(cache=True, nogil=True)
def _build_node(x, now, V, E, P):  # type: ignore[no-untyped-def]
    """Node ``x``'s pieces from the view and its events; False if they do not fit in K."""
    fm, gm, cpu, mem = V[0], V[1], V[2], V[3]
    e_time, _, e_sign, e_fm, e_gm, e_cpu, e_mem, _, e_next, n_first = E
    p_n, p_time, p_fm, p_gm, p_cpu, p_mem, p_full, p_mask = P
    n_gpus = fm.shape[1]
    cnt = 0
    e = n_first[x]
    while e >= 0:
        cnt += 1
        e = e_next[e]
    idx = np.empty(cnt, np.int64)
    e = n_first[x]
    for i in range(cnt):
        idx[i] = e
        e = e_next[e]
    # By time; at one time ends before starts (what ends at t is free for what starts at t),
    # then by event index: a total order.
    for i in range(1, cnt):
        v = idx[i]
        j = i - 1
        while j >= 0 and (
            e_time[idx[j]] > e_time[v]
            or (e_time[idx[j]] == e_time[v] and e_sign[idx[j]] < e_sign[v])
            or (e_time[idx[j]] == e_time[v] and e_sign[idx[j]] == e_sign[v] and idx[j] > v)
        ):
            idx[j + 1] = idx[j]
            j -= 1
        idx[j + 1] = v
    k_cap = p_time.shape[1]
    p_time[x, 0] = now
    for g in range(n_gpus):
        p_fm[x, 0, g] = fm[x, g]
        p_gm[x, 0, g] = gm[x, g]
    p_cpu[x, 0] = cpu[x]
    p_mem[x, 0] = mem[x]
    a = 0
    i = 0
    while True:
        full = 0
        bits = 0
        for g in range(n_gpus):
            if p_fm[x, a, g] == MILLI:
                full += 1
                if n_gpus <= 64:
                    bits |= 1 << g
        p_full[x, a] = full
        p_mask[x, a] = bits
        if i == cnt:
            break
        t = e_time[idx[i]]
        a += 1
        if a >= k_cap:
            return False
        for g in range(n_gpus):
            p_fm[x, a, g] = p_fm[x, a - 1, g]
            p_gm[x, a, g] = p_gm[x, a - 1, g]
        p_cpu[x, a] = p_cpu[x, a - 1]
        p_mem[x, a] = p_mem[x, a - 1]
        p_time[x, a] = t
        while i < cnt and e_time[idx[i]] == t:
            e = idx[i]
            sg = e_sign[e]
            for g in range(n_gpus):
                p_fm[x, a, g] += sg * e_fm[e, g]
                p_gm[x, a, g] += sg * e_gm[e, g]
            p_cpu[x, a] += sg * e_cpu[e]
            p_mem[x, a] += sg * e_mem[e]
            i += 1
    p_n[x] = a + 1
    return True


@njit(cache=True, nogil=True)
def _build_all(now, ne, V, E, P):  # type: ignore[no-untyped-def]
    """Link the first ``ne`` events per node and build every node; False if K is too small."""
    _link(ne, E)
    for x in range(V[0].shape[0]):
        if not _build_node(x, now, V, E, P):
            return False
    return True


@njit(cache=True, nogil=True)
def _running_events(  # type: ignore[no-untyped-def]
    order, n, j_t0, j_t1, j_end, t_node, t_milli, t_gmem, t_cpu, t_mem, t_gpus, now, ne, E
):  # fmt: skip
    """Append an end event for every task of running jobs ``order[:n]``; the new count."""
    e_time, e_node, e_sign, e_fm, e_gm, e_cpu, e_mem, e_res = E[:8]
    n_gpus = e_fm.shape[1]
    for i in range(n):
        s = order[i]
        t = j_end[s] if j_end[s] > now else now
        for k in range(j_t0[s], j_t1[s]):
            e_time[ne] = t
            e_node[ne] = t_node[k]
            e_sign[ne] = 1
            for g in range(n_gpus):
                e_fm[ne, g] = t_milli[k] if t_gpus[k, g] else 0
                e_gm[ne, g] = t_gmem[k] if t_gpus[k, g] else 0
            e_cpu[ne] = t_cpu[k]
            e_mem[ne] = t_mem[k]
            e_res[ne] = -1
            ne += 1
    return ne


@njit(cache=True, nogil=True)
def _whole_count(full, cpu, mem, tp):  # type: ignore[no-untyped-def]
    """``node_count`` for a whole-GPU or CPU-only request, from the fully free GPUs."""
    gpus, c, m, limit = tp[0], tp[3], tp[4], tp[5]
    k = limit if gpus == 0 else full // gpus
    if c and cpu // c < k:
        k = cpu // c
    if m and mem // m < k:
        k = mem // m
    if limit < k:
        k = limit
    return k if k > 0 else 0


@njit(cache=True, nogil=True)
def _bits(m):  # type: ignore[no-untyped-def]
    n = 0
    while m != 0:
        m &= m - 1
        n += 1
    return n


@njit(cache=True, nogil=True, inline="always")
def _fill(s, x, tp, usable, p_n, p_fm, p_gm, p_cpu, p_mem, p_full, ic, ic_ok, runs, n_runs):  # type: ignore[no-untyped-def]
    """Fill ``ic[s, x]``: tasks ``tp`` each piece of node ``x`` holds on its own (for one
    task, comparisons are enough: 0 or 1), and ``runs[s, x]``, the runs of consecutive pieces
    that hold one. Nothing to do if they are up to date."""
    if ic_ok[s, x]:
        return
    ic_ok[s, x] = True
    n_p = p_n[x]
    gpus, milli, gmem, c, m, limit = tp[0], tp[1], tp[2], tp[3], tp[4], tp[5]
    for a in range(n_p):
        k = 0
        if not usable:
            k = 0
        elif limit == 1:
            if (c and p_cpu[x, a] < c) or (m and p_mem[x, a] < m):
                k = 0
            elif gpus == 0:
                k = 1
            elif milli >= MILLI:
                k = 1 if p_full[x, a] >= gpus else 0
            else:
                for g in range(p_fm.shape[2]):
                    if p_fm[x, a, g] >= milli and (gmem == 0 or p_gm[x, a, g] >= gmem):
                        k = 1
                        break
        elif gpus == 0 or milli >= MILLI:
            k = _whole_count(p_full[x, a], p_cpu[x, a], p_mem[x, a], tp)
        else:
            k = node_count(p_fm[x, a], p_gm[x, a], p_cpu[x, a], p_mem[x, a], tp)
        ic[s, x, a] = k
    # Runs of consecutive pieces that each hold a task: (first piece, first piece after).
    r = 0
    a = 0
    while a < n_p:
        if ic[s, x, a] < 1:
            a += 1
            continue
        b = a + 1
        while b < n_p and ic[s, x, b] >= 1:
            b += 1
        runs[s, x, r, 0] = a
        runs[s, x, r, 1] = b
        r += 1
        a = b
    n_runs[s, x] = r


@njit(cache=True, nogil=True)
def _win_min(x, a, t_end, p_n, p_time, p_fm, p_gm, p_cpu, p_mem, mfm, mgm):  # type: ignore[no-untyped-def]
    """The element-wise minimum of the pieces a window from within piece ``a`` until
    ``t_end`` overlaps (piece ``a`` and every later one that starts before ``t_end``):
    per-GPU share and memory in ``mfm``/``mgm``; returns (CPU, memory)."""
    n_gpus = mfm.shape[0]
    for g in range(n_gpus):
        mfm[g] = p_fm[x, a, g]
        mgm[g] = p_gm[x, a, g]
    mc = p_cpu[x, a]
    mm = p_mem[x, a]
    q = a + 1
    while q < p_n[x] and p_time[x, q] < t_end:
        for g in range(n_gpus):
            if p_fm[x, q, g] < mfm[g]:
                mfm[g] = p_fm[x, q, g]
            if p_gm[x, q, g] < mgm[g]:
                mgm[g] = p_gm[x, q, g]
        if p_cpu[x, q] < mc:
            mc = p_cpu[x, q]
        if p_mem[x, q] < mm:
            mm = p_mem[x, q]
        q += 1
    return mc, mm


@njit(cache=True, nogil=True)
def _win_count(x, a, t_end, tp, p_n, p_time, p_fm, p_gm, p_cpu, p_mem, p_mask, mfm, mgm):  # type: ignore[no-untyped-def]
    """Tasks ``tp`` node ``x`` can hold from within piece ``a`` until ``t_end`` (the count
    on the window's element-wise minimum: the same GPUs free throughout)."""
    if tp[0] == 0 or (tp[1] >= MILLI and mfm.shape[0] <= 64):
        # Whole GPUs: one is free throughout if it is fully free in every piece.
        bits = p_mask[x, a]
        mc = p_cpu[x, a]
        mm = p_mem[x, a]
        q = a + 1
        while q < p_n[x] and p_time[x, q] < t_end:
            bits &= p_mask[x, q]
            if p_cpu[x, q] < mc:
                mc = p_cpu[x, q]
            if p_mem[x, q] < mm:
                mm = p_mem[x, q]
            q += 1
        return _whole_count(_bits(bits), mc, mm, tp)
    if tp[5] == 1:  # one fractional task: some GPU keeps the share and memory throughout
        q_end = a
        while q_end < p_n[x] and (q_end == a or p_time[x, q_end] < t_end):
            if (tp[3] and p_cpu[x, q_end] < tp[3]) or (tp[4] and p_mem[x, q_end] < tp[4]):
                return 0
            q_end += 1
        for g in range(p_fm.shape[2]):
            q = a
            while q < q_end and p_fm[x, q, g] >= tp[1] and (tp[2] == 0 or p_gm[x, q, g] >= tp[2]):
                q += 1
            if q == q_end:
                return 1
        return 0
    mc, mm = _win_min(x, a, t_end, p_n, p_time, p_fm, p_gm, p_cpu, p_mem, mfm, mgm)
    return node_count(mfm, mgm, mc, mm, tp)


@njit(cache=True, nogil=True)
def _bound(s, x, a, t_end, p_n, p_time, ic):  # type: ignore[no-untyped-def]
    """The fewest tasks any single piece of a window (as in ``_win_count``) holds: an upper
    bound on the window's count (``ic[s, x]`` filled)."""
    b = ic[s, x, a]
    q = a + 1
    while b > 0 and q < p_n[x] and p_time[x, q] < t_end:
        if ic[s, x, q] < b:
            b = ic[s, x, q]
        q += 1
    return b


@njit(cache=True, nogil=True)
def _candidate(s, x, a0, t0, d, p_n, p_time, runs, n_runs):  # type: ignore[no-untyped-def]
    """The first start on node ``x`` at or after ``t0`` (in piece ``a0``) whose window
    (``d`` long) has every piece holding a task on its own: the window must end before the
    run of such pieces it starts in does. ``(piece, start)``, or ``(p_n[x], inf)`` if none."""
    n_p = p_n[x]
    for r in range(n_runs[s, x]):
        ra = runs[s, x, r, 0]
        rb = runs[s, x, r, 1]
        if rb <= a0:
            continue
        if ra > a0:
            a = ra
            t = p_time[x, ra]
        else:
            a = a0
            t = t0
        if rb == n_p or not p_time[x, rb] < t + d:
            return a, t
    return n_p, np.inf


@njit(cache=True, nogil=True)
def _gang_start(s, tp, need, t_min, d, use, P, C, cnt, mfm, mgm):  # type: ignore[no-untyped-def]
    """The earliest start from ``t_min`` at which the nodes together hold ``need`` tasks for
    ``d`` (per-node exact counts then left in ``cnt``; all 0 and inf if never).

    Candidates are ``t_min`` and each piece start after it (only there can a node's window
    lose a piece and hold more). Sweeping them in order, a node's bound (``_bound``) is
    recounted only when its window gains or loses a piece; exact counts are taken only when
    the bounds add up to ``need``."""
    p_n, p_time, p_fm, p_gm, p_cpu, p_mem, p_full, p_mask = P
    ic, ic_ok, runs, n_runs = C
    n_nodes = p_n.shape[0]
    total = 0
    for x in range(n_nodes):
        total += p_n[x]
        if not ic_ok[s, x]:
            _fill(s, x, tp, use[x], p_n, p_fm, p_gm, p_cpu, p_mem, p_full, ic, ic_ok, runs, n_runs)
    starts = np.empty(total, np.float64)
    s_node = np.empty(total, np.int64)
    n_s = 0
    for x in range(n_nodes):
        for a in range(1, p_n[x]):
            starts[n_s] = p_time[x, a]
            s_node[n_s] = x
            n_s += 1
    order = np.argsort(starts[:n_s], kind="mergesort")
    piece = np.empty(n_nodes, np.int64)
    bound = np.empty(n_nodes, np.int64)
    dirty = np.zeros(n_nodes, np.bool_)
    b_total = 0
    for x in range(n_nodes):
        piece[x] = _piece_at(x, t_min, p_n, p_time)
        bound[x] = _bound(s, x, piece[x], t_min + d, p_n, p_time, ic)
        b_total += bound[x]
    i_s = 0  # the next piece start to become a candidate
    i_e = 0  # the next piece start to join a window on its right
    t = t_min
    while True:
        while i_e < n_s and starts[order[i_e]] < t + d:
            dirty[s_node[order[i_e]]] = True
            i_e += 1
        for x in range(n_nodes):
            if dirty[x]:
                dirty[x] = False
                while piece[x] + 1 < p_n[x] and p_time[x, piece[x] + 1] <= t:
                    piece[x] += 1
                b = _bound(s, x, piece[x], t + d, p_n, p_time, ic)
                b_total += b - bound[x]
                bound[x] = b
        if b_total >= need:
            got = 0
            for x in range(n_nodes):
                cnt[x] = 0
                if bound[x] > 0:
                    cnt[x] = _win_count(
                        x, piece[x], t + d, tp, p_n, p_time, p_fm, p_gm, p_cpu, p_mem, p_mask,
                        mfm, mgm,
                    )  # fmt: skip
                    got += cnt[x]
            if got >= need:
                return t
        while i_s < n_s and starts[order[i_s]] <= t:
            i_s += 1
        if i_s == n_s:
            break
        t = starts[order[i_s]]
        while i_s < n_s and starts[order[i_s]] == t:
            dirty[s_node[order[i_s]]] = True
            i_s += 1
    cnt[:] = 0
    return np.inf


@njit(cache=True, nogil=True)
def _piece_at(x, t, p_n, p_time):  # type: ignore[no-untyped-def]
    """The last piece of node ``x`` that starts at or before ``t`` (t >= the profile's now)."""
    a = 0
    while a + 1 < p_n[x] and p_time[x, a + 1] <= t:
        a += 1
    return a


@njit(cache=True, nogil=True)
def _holder(t_end, c0, E):  # type: ignore[no-untyped-def]
    """The reservation that starts first (then the earliest made) among those holding, before
    ``t_end``, a node where the job fits now (``c0 > 0``); -1 if none."""
    e_time, e_sign, e_res, e_next, n_first = E[0], E[2], E[7], E[8], E[9]
    best = -1
    best_t = np.inf
    for x in range(c0.shape[0]):
        if c0[x] <= 0:
            continue
        e = n_first[x]
        while e >= 0:
            r = e_res[e]
            if r >= 0 and e_sign[e] < 0 and e_time[e] < t_end:
                if e_time[e] < best_t or (e_time[e] == best_t and r < best):
                    best_t = e_time[e]
                    best = r
            e = e_next[e]
    return best


@njit(cache=True, nogil=True)
def _start_now(s, tp, need, t_end, ok, healthy, all_healthy, P, C, c0, limit, mfm, mgm):  # type: ignore[no-untyped-def]
    """Per node: tasks that fit the view now (``c0``), and that fit from now until ``t_end``
    without touching any reservation (``limit``; exact only when their total reaches
    ``need``). Returns both totals."""
    p_n, p_time, p_fm, p_gm, p_cpu, p_mem, p_full, p_mask = P
    ic, ic_ok, runs, n_runs = C
    n_nodes = c0.shape[0]
    v_total = 0
    for x in range(n_nodes):
        if not ic_ok[s, x]:
            usable = ok[x] and (all_healthy or healthy[x])
            _fill(s, x, tp, usable, p_n, p_fm, p_gm, p_cpu, p_mem, p_full, ic, ic_ok, runs, n_runs)
        c0[x] = ic[s, x, 0]
        v_total += c0[x]
        limit[x] = 0
    if v_total < need:
        return v_total, 0
    bound = 0
    for x in range(n_nodes):
        if c0[x] > 0:
            limit[x] = _bound(s, x, 0, t_end, p_n, p_time, ic)
            bound += limit[x]
    if bound < need:
        return v_total, bound
    s_total = 0
    for x in range(n_nodes):
        if limit[x] > 0:
            limit[x] = _win_count(
                x, 0, t_end, tp, p_n, p_time, p_fm, p_gm, p_cpu, p_mem, p_mask, mfm, mgm
            )
            s_total += limit[x]
    return v_total, s_total


@njit(cache=True, nogil=True)
def _shadow(t_end, c0, P, sfm, sgm, scpu, smem, mfm, mgm):  # type: ignore[no-untyped-def]
    """On each node a job fits now (``c0 > 0``): what is free now but not throughout until
    ``t_end`` (what reservations hold then), per GPU share and memory, CPU and memory.
    (A GPU whose share stays free but whose memory does not is left out: a claim on a GPU
    holds some share.)"""
    p_n, p_time, p_fm, p_gm, p_cpu, p_mem = P[0], P[1], P[2], P[3], P[4], P[5]
    for x in range(c0.shape[0]):
        sfm[x] = 0
        sgm[x] = 0
        scpu[x] = 0
        smem[x] = 0
        if c0[x] <= 0 or p_n[x] < 2:
            continue
        mc, mm = _win_min(x, 0, t_end, p_n, p_time, p_fm, p_gm, p_cpu, p_mem, mfm, mgm)
        for g in range(mfm.shape[0]):
            sfm[x, g] = p_fm[x, 0, g] - mfm[g]
            sgm[x, g] = p_gm[x, 0, g] - mgm[g]
        scpu[x] = p_cpu[x, 0] - mc
        smem[x] = p_mem[x, 0] - mm


@njit(cache=True, nogil=True)
def _plan(  # type: ignore[no-untyped-def]
    j, nw, now, all_healthy, V, P, E, C, W, U, lanes, counters, r_until, r_win, limit, c0
):  # fmt: skip
    """Give window jobs ``j..nw-1``, in order, their reservations on the profile; stop at the
    first that can start now (``_START``, with the most tasks each node may take in
    ``limit``), or when an array is full (a ``_GROW_*`` code; nothing changed for that job).
    ``counters`` holds the event and reservation counts. Returns (job position, code).

    ``W``: per window job, its shape (a row of ``U``), lane, expected run, and the outcome
    written here (status to tell, the reservation holding it back, its own reservation).
    ``U``: per shape, ``task_params``, fewest tasks, nodes it may use. ``lanes``: per lane,
    whether none of its jobs waits yet (the first to wait says why, for the lane), and
    whether its jobs get no reservations (they can never fit, or their quota holds them)."""
    healthy = V[5]
    e_time, e_node, e_sign, e_fm, e_gm, e_cpu, e_mem, e_res, e_next, n_first = E
    p_n, p_time, p_fm, p_gm, p_cpu, p_mem, p_full, p_mask = P
    ic, ic_ok, runs, n_runs = C
    w_s, w_lane, w_dur, w_stat, w_hold, w_res = W
    u_tp, u_min, u_ok = U
    lane_open, lane_dead = lanes
    n_nodes, n_gpus = V[0].shape
    k_cap = p_time.shape[1]
    mfm = np.empty(n_gpus, np.int64)
    mgm = np.empty(n_gpus, np.int64)
    cnt = np.zeros(n_nodes, np.int64)
    cand_a = np.zeros(n_nodes, np.int64)
    cand_t = np.zeros(n_nodes, np.float64)
    use = np.zeros(n_nodes, np.bool_)
    fits_now = np.full(u_tp.shape[0], -1, np.int64)  # per shape: tasks the view takes now
    a_now = np.empty(n_nodes, np.int64)  # per node: the piece now is in
    for x in range(n_nodes):
        a_now[x] = _piece_at(x, now, p_n, p_time)
    while j < nw:
        s = w_s[j]
        lane = w_lane[j]
        tp = u_tp[s]
        ok = u_ok[s]
        tasks = tp[5]
        need = u_min[s]
        d = w_dur[j]
        w_stat[j] = _NO_STATUS
        w_res[j] = -1
        if lane_dead[lane]:
            j += 1
            continue
        if fits_now[s] < 0:  # the view does not change during the call: once per shape
            fits_now[s] = 0
            for x in range(n_nodes):
                usable = ok[x] and (all_healthy or healthy[x])
                if not ic_ok[s, x]:
                    _fill(
                        s, x, tp, usable, p_n, p_fm, p_gm, p_cpu, p_mem, p_full, ic, ic_ok, runs,
                        n_runs,
                    )  # fmt: skip
                fits_now[s] += ic[s, x, 0]
        v_total = fits_now[s]
        if v_total >= need:
            v_total, s_total = _start_now(
                s, tp, need, now + d, ok, healthy, all_healthy, P, C, c0, limit, mfm, mgm
            )
            if s_total >= need:
                return j, _START
        if lane_open[lane]:  # the first of its lane to wait: it says why
            lane_open[lane] = False
            if v_total >= need:
                w_stat[j] = _HELD_BACK
                w_hold[j] = _holder(now + d, c0, E)
            else:
                w_stat[j] = _NO_FIT
        # The earliest start on the profile.
        t_min = now
        start = np.inf
        for x in range(n_nodes):
            use[x] = ok[x] and (all_healthy or healthy[x])
            cnt[x] = 0
        if tasks == 1:
            # Each node's first start whose every piece holds the task on its own; then the
            # exact window counts, earliest candidate first, until one is later than the best.
            for x in range(n_nodes):
                if not ic_ok[s, x]:
                    _fill(
                        s, x, tp, use[x], p_n, p_fm, p_gm, p_cpu, p_mem, p_full, ic, ic_ok, runs,
                        n_runs,
                    )  # fmt: skip
                # The first run of pieces (from now) that outlasts the window: ``_candidate``,
                # written out here (it is the innermost loop).
                cand_a[x] = p_n[x]
                cand_t[x] = np.inf
                for r in range(n_runs[s, x]):
                    ra = runs[s, x, r, 0]
                    rb = runs[s, x, r, 1]
                    if rb <= a_now[x]:
                        continue
                    a = ra if ra > a_now[x] else a_now[x]
                    t = p_time[x, a] if ra > a_now[x] else t_min
                    if rb == p_n[x] or not p_time[x, rb] < t + d:
                        cand_a[x] = a
                        cand_t[x] = t
                        break
            best_c = 1 << 62
            best_x = -1
            while True:
                bx = -1
                bt = np.inf
                for x in range(n_nodes):
                    if cand_t[x] < bt:
                        bt = cand_t[x]
                        bx = x
                if bx < 0 or bt > start:
                    break
                a = cand_a[bx]
                if a + 1 >= p_n[bx] or p_time[bx, a + 1] >= bt + d:
                    c = ic[s, bx, a]
                else:
                    c = _win_count(
                        bx, a, bt + d, tp, p_n, p_time, p_fm, p_gm, p_cpu, p_mem, p_mask, mfm,
                        mgm,
                    )  # fmt: skip
                if c >= 1:
                    if bt < start or c < best_c:
                        start, best_c, best_x = bt, c, bx
                    cand_t[bx] = np.inf
                elif a + 1 < p_n[bx]:
                    a, t = _candidate(s, bx, a + 1, p_time[bx, a + 1], d, p_n, p_time, runs, n_runs)
                    cand_a[bx] = a
                    cand_t[bx] = t
                else:
                    cand_t[bx] = np.inf
            if best_x >= 0:
                cnt[best_x] = best_c
        else:
            start = _gang_start(s, tp, need, t_min, d, use, P, C, cnt, mfm, mgm)
        if start == np.inf:
            # It would not fit even once everything has ended: no reservation, and none for
            # the jobs behind it in its lane.
            lane_open[lane] = False
            lane_dead[lane] = True
            j += 1
            continue
        # Where: one node if one can hold every task to start (the least roomy such node),
        # else the roomiest first; ties to the lowest node index.
        total = 0
        most = 0
        for x in range(n_nodes):
            total += cnt[x]
            if cnt[x] > most:
                most = cnt[x]
        want = tasks if tasks < total else total
        take = np.zeros(n_nodes, np.int64)
        if most >= want:
            bx = -1
            for x in range(n_nodes):
                if cnt[x] >= want and (bx < 0 or cnt[x] < cnt[bx]):
                    bx = x
            take[bx] = want
        else:
            left = want
            while left > 0:
                bx = -1
                for x in range(n_nodes):
                    if take[x] == 0 and cnt[x] > 0 and (bx < 0 or cnt[x] > cnt[bx]):
                        bx = x
                take[bx] = cnt[bx] if cnt[bx] < left else left
                left -= take[bx]
        n_take = 0
        for x in range(n_nodes):
            if take[x] > 0:
                n_take += 1
                if p_n[x] + 2 > k_cap:
                    return j, _GROW_PIECES
        if counters[0] + 2 * n_take > e_time.shape[0]:
            return j, _GROW_EVENTS
        if counters[1] + 1 > r_until.shape[0]:
            return j, _GROW_RESERVATIONS
        rid = counters[1]
        counters[1] += 1
        r_until[rid] = start
        r_win[rid] = j
        w_res[j] = rid
        if d > 0:
            gpus, milli, gmem, c, mem_t = tp[0], tp[1], tp[2], tp[3], tp[4]
            for x in range(n_nodes):
                if take[x] == 0:
                    continue
                a = _piece_at(x, start, p_n, p_time)
                _win_min(x, a, start + d, p_n, p_time, p_fm, p_gm, p_cpu, p_mem, mfm, mgm)
                hfm = np.zeros(n_gpus, np.int64)
                hgm = np.zeros(n_gpus, np.int64)
                for _ in range(take[x]):
                    if gpus == 0:
                        continue
                    if milli < MILLI:
                        bg = -1
                        for g in range(n_gpus):
                            if mfm[g] >= milli and (gmem == 0 or mgm[g] >= gmem):
                                if bg < 0 or mfm[g] < mfm[bg]:
                                    bg = g
                        if bg < 0:
                            break
                        hfm[bg] += milli
                        hgm[bg] += gmem
                        mfm[bg] -= milli
                        mgm[bg] -= gmem
                    else:
                        left = gpus
                        for g in range(n_gpus):
                            if left and mfm[g] == MILLI:
                                hfm[g] += MILLI
                                hgm[g] += mgm[g]
                                mfm[g] = 0
                                mgm[g] = 0
                                left -= 1
                for sign, t in ((-1, start), (1, start + d)):
                    e = counters[0]
                    counters[0] += 1
                    e_time[e] = t
                    e_node[e] = x
                    e_sign[e] = sign
                    for g in range(n_gpus):
                        e_fm[e, g] = hfm[g]
                        e_gm[e, g] = hgm[g]
                    e_cpu[e] = take[x] * c
                    e_mem[e] = take[x] * mem_t
                    e_res[e] = rid
                    e_next[e] = n_first[x]
                    n_first[x] = e
                _build_node(x, p_time[x, 0], V, E, P)
                ic_ok[:, x] = False
                a_now[x] = _piece_at(x, now, p_n, p_time)
        j += 1
    return j, _DONE


class _Profile:
    """The profile's arrays (see the comment above ``_link``), grown as needed."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.n = view.n_nodes
        self.g = view.gpu_slots
        self.now = 0.0
        self._pieces(16)
        self._events(1024)
        self.counters = np.zeros(2, np.int64)  # events, reservations
        self.r_until = np.zeros(128, np.float64)
        self.r_win = np.zeros(128, np.int64)
        self.ic = np.zeros((1, self.n, 16), np.int32)
        self.ic_ok = np.zeros((1, self.n), np.bool_)
        self.runs = np.zeros((1, self.n, 16, 2), np.int32)
        self.n_runs = np.zeros((1, self.n), np.int32)

    @property
    def V(self) -> tuple[np.ndarray, ...]:  # noqa: N802 (the compiled code's names)
        v = self.view
        return (v.gpu_free_milli, v.gpu_free_mem, v.free_cpu, v.free_mem, v.gpu_cap_mem, v.healthy)

    @property
    def P(self) -> tuple[np.ndarray, ...]:  # noqa: N802
        return (
            self.p_n, self.p_time, self.p_fm, self.p_gm, self.p_cpu, self.p_mem, self.p_full,
            self.p_mask,
        )  # fmt: skip

    @property
    def E(self) -> tuple[np.ndarray, ...]:  # noqa: N802
        return (
            self.e_time, self.e_node, self.e_sign, self.e_fm, self.e_gm, self.e_cpu, self.e_mem,
            self.e_res, self.e_next, self.n_first,
        )  # fmt: skip

    @property
    def C(self) -> tuple[np.ndarray, ...]:  # noqa: N802
        return (self.ic, self.ic_ok, self.runs, self.n_runs)

    def _pieces(self, k: int) -> None:
        n, g = self.n, self.g
        self.p_n = np.ones(n, np.int64)
        self.p_time = np.zeros((n, k), np.float64)
        self.p_fm = np.zeros((n, k, g), np.int64)
        self.p_gm = np.zeros((n, k, g), np.int64)
        self.p_cpu = np.zeros((n, k), np.int64)
        self.p_mem = np.zeros((n, k), np.int64)
        self.p_full = np.zeros((n, k), np.int64)
        self.p_mask = np.zeros((n, k), np.int64)

    def _events(self, e: int) -> None:
        g = self.g
        self.e_time = np.zeros(e, np.float64)
        self.e_node = np.zeros(e, np.int64)
        self.e_sign = np.zeros(e, np.int64)
        self.e_fm = np.zeros((e, g), np.int64)
        self.e_gm = np.zeros((e, g), np.int64)
        self.e_cpu = np.zeros(e, np.int64)
        self.e_mem = np.zeros(e, np.int64)
        self.e_res = np.zeros(e, np.int64)
        self.e_next = np.zeros(e, np.int64)
        self.n_first = np.full(self.n, -1, np.int64)

    def shapes(self, count: int) -> None:
        """Room in the piece-count cache for ``count`` shapes, all stale."""
        k = self.p_time.shape[1]
        if self.ic.shape[0] < count or self.ic.shape[2] != k:
            rows = max(count + 16, self.ic.shape[0])  # piece counts fit int32 easily
            self.ic = np.zeros((rows, self.n, k), np.int32)
            self.ic_ok = np.zeros((rows, self.n), np.bool_)
            self.runs = np.zeros((rows, self.n, k, 2), np.int32)
            self.n_runs = np.zeros((rows, self.n), np.int32)
        else:
            self.ic_ok[:] = False

    def grow(self, code: int) -> None:
        if code == _GROW_PIECES:
            self._pieces(2 * self.p_time.shape[1])
            self.build_all()
        elif code == _GROW_EVENTS:
            self.ensure_events(2 * len(self.e_time))
        else:
            for name in ("r_until", "r_win"):
                a = getattr(self, name)
                setattr(self, name, np.concatenate((a, np.zeros_like(a))))

    def ensure_events(self, size: int) -> None:
        if size <= len(self.e_time):
            return
        names = ("e_time", "e_node", "e_sign", "e_fm", "e_gm", "e_cpu", "e_mem", "e_res")
        old = {k: getattr(self, k) for k in names}
        ne = int(self.counters[0])
        self._events(max(size, 2 * len(self.e_time)))
        for k, a in old.items():
            getattr(self, k)[:ne] = a[:ne]
        _link(ne, self.E)

    def reset(self, now: float, by_end: RunningByEnd, keep_holds: bool) -> None:
        """Rebuild from the view and the running jobs, keeping the reservations' holds (or
        dropping every reservation)."""
        self.now = now
        ne = int(self.counters[0])
        if keep_holds:
            held = np.flatnonzero(self.e_res[:ne] >= 0)
            for k in ("e_time", "e_node", "e_sign", "e_fm", "e_gm", "e_cpu", "e_mem", "e_res"):
                a = getattr(self, k)
                a[: len(held)] = a[held]
            ne = len(held)
        else:
            ne = 0
            self.counters[1] = 0
        self.counters[0] = ne
        self.ensure_events(ne + by_end.n_tasks)
        self.counters[0] = _running_events(
            by_end.order, len(by_end), by_end.j_t0, by_end.j_t1, by_end.j_end, by_end.t_node,
            by_end.t_milli, by_end.t_gmem, by_end.t_cpu, by_end.t_mem, by_end.t_gpus, now, ne,
            self.E,
        )  # fmt: skip
        self.build_all()

    def build_all(self) -> None:
        while not _build_all(self.now, int(self.counters[0]), self.V, self.E, self.P):
            self._pieces(2 * self.p_time.shape[1])
        self.shapes(self.ic.shape[0])

    def add_running(self, r: Running, end: float) -> None:
        """``r`` started now (it is on the view): its tasks come back at ``end``."""
        tasks = r.placement.tasks
        ne = int(self.counters[0])
        self.ensure_events(ne + len(tasks))
        t = max(end, self.now)
        for tp in tasks:
            e = ne
            ne += 1
            self.e_time[e] = t
            self.e_node[e] = tp.node
            self.e_sign[e] = 1
            self.e_fm[e] = 0
            self.e_gm[e] = 0
            for gi in tp.gpus:
                self.e_fm[e, gi] = tp.gpu_milli
                self.e_gm[e, gi] = tp.gpu_memory_mib
            self.e_cpu[e] = tp.cpu_milli
            self.e_mem[e] = tp.memory_mib
            self.e_res[e] = -1
            self.e_next[e] = self.n_first[tp.node]
            self.n_first[tp.node] = e
        self.counters[0] = ne
        V, E, P = self.V, self.E, self.P  # noqa: N806
        for x in dict.fromkeys(tp.node for tp in tasks):
            if not _build_node(x, self.now, V, E, P):
                self._pieces(2 * self.p_time.shape[1])
                self.build_all()
                return
            self.ic_ok[:, x] = False

    def next_change(self) -> float:
        """The earliest event still ahead of the profile's now (inf if none)."""
        ne = int(self.counters[0])
        t = self.e_time[:ne]
        ahead = t[t > self.now]
        return float(ahead.min()) if len(ahead) else float("inf")


class Conservative:
    """Conservative backfill's state between cycles: the queue in order, the profile, and the
    plan over the window of the first ``depth`` pending jobs (see the module docstring)."""

    def __init__(self, view: ClusterView, oracle: bool, depth: int) -> None:
        self.oracle = oracle
        self.depth = depth
        self.view = view
        self.by_end = RunningByEnd(view, oracle)
        self.profile = _Profile(view)
        view.listeners.append(self._node_changed)
        self._changes = 0  # node changes on the view so far
        # The queue: pending (key, job id), sorted; entries of jobs gone are pruned lazily.
        self._queue: list[tuple[Any, str]] = []
        self._jobs: dict[str, Job] = {}
        # Per pending job, a row ("handle") of: its shape, expected run, and the reason to
        # wait it was last told (status, and the handle of the job holding it back).
        self._handle: dict[str, int] = {}
        self._free_handles: list[int] = []
        self.h_shape = np.zeros(256, np.int64)
        self.h_dur = np.zeros(256, np.float64)
        self.h_code = np.zeros(256, np.int64)
        self.h_hold = np.full(256, -1, np.int64)
        # Shapes: (request, tasks, fewest tasks) -> row of s_tp (task_params), s_min, s_ok.
        self._shape_ix: dict[tuple[TaskRequest, int, int], int] = {}
        self.s_tp = np.zeros((16, 6), np.int64)
        self.s_min = np.zeros(16, np.int64)
        self.s_ok = np.zeros((16, view.n_nodes), np.bool_)
        # The plan's shapes: shape -> row of u_* (and of the profile's piece-count cache).
        self.s_local = np.full(16, -1, np.int64)
        self.u_tp = np.zeros((16, 6), np.int64)
        self.u_min = np.zeros(16, np.int64)
        self.u_ok = np.zeros((16, view.n_nodes), np.bool_)
        self.n_local = 0
        # The plan's window: jobs in queue order (started ones included) and, per position,
        # handle, shape (a row of u_*), lane, expected run, and the outcome (``_plan``'s W).
        self.window: list[Job] = []
        self.window_ids: set[str] = set()  # the window's jobs still pending
        self._last_entry: tuple[Any, str] | None = None
        self._w_h = np.zeros(128, np.int64)
        self._W = tuple(
            np.zeros(128, dt) for dt in (np.int64, np.int64, np.float64) + (np.int64,) * 3
        )
        self._lanes: tuple[np.ndarray, ...] = (np.zeros(0, np.bool_), np.zeros(0, np.bool_))
        self._held: set[int] = set()  # lanes beyond the window held back by a reservation
        self._limit = np.zeros(view.n_nodes, np.int64)
        self._c0 = np.zeros(view.n_nodes, np.int64)
        self._scratch = (np.zeros(view.gpu_slots, np.int64), np.zeros(view.gpu_slots, np.int64))
        shape2 = (view.n_nodes, view.gpu_slots)
        self._shadow_arrays = (
            np.zeros(shape2, np.int64),
            np.zeros(shape2, np.int64),
            np.zeros(view.n_nodes, np.int64),
            np.zeros(view.n_nodes, np.int64),
        )
        self._planned_at = -1  # view changes the plan accounts for (-1: plan afresh)
        self._queue_version = 0  # bumped when a job joins inside the window
        self._planned_queue = 0
        self._next_change = float("inf")
        self._ended_seen = 0
        self._stale = False  # running jobs were evicted since the profile was built

    def _node_changed(self, n: int) -> None:
        self._changes += 1

    @property
    def reservations(self) -> list[tuple[str, float]]:
        """The plan's reservations, (job id, until), in queue order."""
        prof = self.profile
        nr = int(prof.counters[1])
        return [
            (self.window[int(i)].id, float(t))
            for i, t in zip(prof.r_win[:nr], prof.r_until[:nr], strict=True)
        ]

    # ---------------------------------------------------------------- the queue
    def submitted(self, key: Any, job: Job) -> None:
        entry = (key, job.id)
        q = self._queue
        i = bisect.bisect_left(q, entry)
        if i == len(q) or q[i] != entry:
            q.insert(i, entry)
        self._jobs[job.id] = job
        if self._last_entry is not None and entry < self._last_entry:
            self._queue_version += 1  # it joins inside the window: plan afresh
        h = self._handle.get(job.id)
        if h is None:
            h = self._free_handles.pop() if self._free_handles else len(self._handle)
            if h >= len(self.h_shape):
                for name in ("h_shape", "h_dur", "h_code", "h_hold"):
                    a = getattr(self, name)
                    setattr(self, name, np.concatenate((a, np.zeros_like(a))))
            self._handle[job.id] = h
        self.h_shape[h] = self._shape(job)
        self.h_dur[h] = duration(job, self.oracle)
        self.h_code[h] = _NO_STATUS
        self.h_hold[h] = -1

    def _shape(self, job: Job) -> int:
        key = (job.task, job.tasks, job.min_tasks)
        s = self._shape_ix.get(key)
        if s is None:
            s = len(self._shape_ix)
            if s == len(self.s_min):
                self.s_tp = np.concatenate((self.s_tp, np.zeros_like(self.s_tp)))
                self.s_min = np.concatenate((self.s_min, np.zeros_like(self.s_min)))
                self.s_ok = np.concatenate((self.s_ok, np.zeros_like(self.s_ok)))
                self.s_local = np.concatenate((self.s_local, np.full(s, -1, np.int64)))
            self.s_tp[s] = task_params(job.task, job.tasks)
            self.s_min[s] = job.min_tasks
            self.s_ok[s] = self.view.task_ok(job.task)
            self._shape_ix[key] = s
        return s

    def _local_rows(self, shapes: np.ndarray) -> np.ndarray:
        """The plan's rows for ``shapes`` (added on first sight)."""
        rows = self.s_local[shapes]
        for s in np.unique(shapes[rows < 0]).tolist():
            u = self.n_local
            self.n_local += 1
            if u == len(self.u_min):
                self.u_tp = np.concatenate((self.u_tp, np.zeros_like(self.u_tp)))
                self.u_min = np.concatenate((self.u_min, np.zeros_like(self.u_min)))
                self.u_ok = np.concatenate((self.u_ok, np.zeros_like(self.u_ok)))
            self.u_tp[u] = self.s_tp[s]
            self.u_min[u] = self.s_min[s]
            self.u_ok[u] = self.s_ok[s]
            self.s_local[s] = u
            if u >= self.profile.ic.shape[0]:
                self.profile.shapes(u + 1)
            rows = self.s_local[shapes]
        return rows

    def _forget(self, jid: str) -> None:
        self._jobs.pop(jid, None)
        h = self._handle.pop(jid, None)
        if h is not None:
            self._free_handles.append(h)

    def _extend_window(self, sched: Scheduler) -> None:
        """Add pending jobs after the window's last, in queue order, until ``depth`` of its
        jobs are pending (entries of jobs gone are pruned on the way)."""
        pending = sched._pending
        q = self._queue
        lo = 0 if self._last_entry is None else bisect.bisect_right(q, self._last_entry)
        i = lo
        kept: list[tuple[Any, str]] = []
        added: list[Job] = []
        lanes: list[int] = []
        room = self.depth - len(self.window_ids)
        while i < len(q) and len(added) < room:
            entry = q[i]
            i += 1
            e = pending.get(entry[1])
            if e is None or e[0] != entry[0]:
                if e is None:
                    self._forget(entry[1])
                continue
            kept.append(entry)
            added.append(self._jobs[entry[1]])
            lanes.append(e[1])
        q[lo:i] = kept
        if not added:
            return
        self._last_entry = kept[-1]
        n0 = len(self.window)
        n1 = n0 + len(added)
        if n1 > len(self._w_h):
            grow = max(n1, len(self._w_h))
            self._w_h = np.concatenate((self._w_h, np.zeros(grow, np.int64)))
            self._W = tuple(np.concatenate((a, np.zeros(grow, a.dtype))) for a in self._W)
        w_s, w_lane, w_dur = self._W[:3]
        hs = np.array([self._handle[j.id] for j in added], dtype=np.int64)
        self._w_h[n0:n1] = hs
        w_s[n0:n1] = self._local_rows(self.h_shape[hs])
        w_lane[n0:n1] = lanes
        w_dur[n0:n1] = self.h_dur[hs]
        self.window.extend(added)
        self.window_ids.update(j.id for j in added)
        n_lanes = len(sched._shapes)
        if n_lanes > len(self._lanes[0]):
            more = n_lanes - len(self._lanes[0])
            self._lanes = tuple(
                np.concatenate((a, np.full(more, v, a.dtype)))
                for a, v in zip(self._lanes, (True, False), strict=True)
            )

    # ---------------------------------------------------------------- the cycle
    def begin(
        self, sched: Scheduler, rng: np.random.Generator, out: list[Decision]
    ) -> Conservative:
        """Plan afresh if anything the plan rests on changed (starting the jobs it starts now
        and telling the others why they wait, once per change of reason); else plan for jobs
        that joined at the window's end, if any."""
        if (
            self._planned_at == self._changes
            and self._planned_queue == self._queue_version
            and sched._now < self._next_change
            and self.window_ids <= sched._pending.keys()
        ):
            if len(self.window_ids) < self.depth and (
                self._last_entry is None
                or bisect.bisect_right(self._queue, self._last_entry) < len(self._queue)
            ):
                n0 = len(self.window)
                self._extend_window(sched)
                if len(self.window) > n0 and self._run(sched, rng, out, n0):
                    self._plan_again(sched, rng, out)
            return self
        self._plan_again(sched, rng, out)
        return self

    def _plan_again(self, sched: Scheduler, rng: np.random.Generator, out: list[Decision]) -> None:
        while True:
            now = sched._now
            self.by_end.sync(sched._running, sched._ended)
            self._ended_seen = sched._ended
            self.profile.reset(now, self.by_end, keep_holds=False)
            self._stale = False
            pending = sched._pending
            if (
                self._planned_queue == self._queue_version
                and self.window_ids <= pending.keys()
                and self.n_local <= 4 * self.depth
            ):
                # The same jobs in the same order, less those that started: keep the window.
                keep = np.fromiter((j.id in self.window_ids for j in self.window), np.bool_)
                n = int(keep.sum())
                self.window = [j for j in self.window if j.id in self.window_ids]
                self._w_h[:n] = self._w_h[: len(keep)][keep]
                for a in self._W[:3]:
                    a[:n] = a[: len(keep)][keep]
            else:
                old = self.window_ids
                self.window, self.window_ids, self._last_entry = [], set(), None
                self.s_local[:] = -1
                self.n_local = 0
                self._extend_window(sched)
                # A job pushed out of the window goes back to the skip-ahead queue.
                for jid in old - self.window_ids:
                    e = pending.get(jid)
                    if e is not None:
                        sched._activate(sched._shapes[e[1]])
            n_lanes = len(sched._shapes)
            self._lanes = (np.ones(n_lanes, np.bool_), np.zeros(n_lanes, np.bool_))
            self._extend_window(sched)
            self._planned_queue = self._queue_version
            # Reservations may move: jobs held back beyond the window are worth another look.
            self._wake_held(sched)
            if not self._run(sched, rng, out, 0):
                return  # else an eviction changed the running jobs: plan again

    def _run(self, sched: Scheduler, rng: np.random.Generator, out: list[Decision], j: int) -> bool:
        """Plan window jobs ``j`` on; True if it must start over (running jobs were evicted)."""
        now = sched._now
        prof = self.profile
        lo = j
        nw = len(self.window)
        lane_open, lane_dead = self._lanes
        while True:
            j, code = _plan(
                j, nw, now, self.view.all_healthy, prof.V, prof.P, prof.E, prof.C, self._W,
                (self.u_tp, self.u_min, self.u_ok), self._lanes, prof.counters, prof.r_until,
                prof.r_win, self._limit, self._c0,
            )  # fmt: skip
            if code == _DONE:
                break
            if code != _START:
                prof.grow(code)
                continue
            job = self.window[j]
            lane = int(self._W[1][j])
            shape = sched._shapes[lane]
            j += 1
            if shape.blocked is not None:
                lane_open[lane], lane_dead[lane] = False, True  # it waits for its quota
                continue
            decision = self._start(sched, job, shape, rng, float(self._W[2][j - 1]))
            if sched._evictions:
                out.extend(sched._evictions)
                sched._evictions.clear()
            out.append(decision)
            if type(decision) is Admit:
                sched._activate(shape)
                self.started(sched, job)
                if self._stale:
                    return True
            else:
                shape.skipped = job.id
                lane_open[lane], lane_dead[lane] = False, True
        self._planned_at = self._changes
        self._next_change = prof.next_change()
        return self._tell(sched, rng, out, lo, nw)

    def _tell(
        self, sched: Scheduler, rng: np.random.Generator, out: list[Decision], lo: int, hi: int
    ) -> bool:
        """Skip decisions for the lane heads among window jobs ``lo..hi-1`` whose reason to
        wait changed since last told; True if telling one evicted running jobs."""
        w_stat, w_hold = self._W[3], self._W[4]
        heads = np.flatnonzero(w_stat[lo:hi]) + lo
        if not len(heads):
            return False
        r_win = self.profile.r_win
        w_h = self._w_h
        hh = w_h[heads]
        st = w_stat[heads]
        rid = w_hold[heads]
        holder = np.where((st == _HELD_BACK) & (rid >= 0), w_h[r_win[np.maximum(rid, 0)]], -1)
        changed = heads[(self.h_code[hh] != st) | (self.h_hold[hh] != holder)]
        self.h_code[hh] = st
        self.h_hold[hh] = holder
        table = sched.table
        for j in changed.tolist():
            job = self.window[j]
            shape = sched._shapes[sched._pending[job.id][1]]
            if w_stat[j] == _HELD_BACK:
                r = int(w_hold[j])
                if r >= 0:
                    out.append(Skip(job, self._behind(r)))
                continue
            if shape.skipped == job.id and (
                shape.blocked is not None
                or (table.is_tracked(shape.sid) and not table.fits(shape.sid))
            ):
                continue  # already told why
            decision = sched._try(job, shape, rng)
            if sched._evictions:
                out.extend(sched._evictions)
                sched._evictions.clear()
            out.append(decision)
            if type(decision) is Admit:  # by evicting: the running jobs changed
                sched._activate(shape)
                self.started(sched, job)
                return True
            shape.skipped = job.id
        return False

    def _behind(self, rid: int) -> BehindReservation:
        prof = self.profile
        return BehindReservation(self.window[int(prof.r_win[rid])].id, float(prof.r_until[rid]))

    def _wake_held(self, sched: Scheduler) -> None:
        """The plan changed: lanes it held back are worth another look."""
        for lane in self._held:
            sched._activate(sched._shapes[lane])
        self._held.clear()

    def decided(self, job: Job) -> bool:
        """Whether ``job`` is in the plan's window (the plan decides when it starts)."""
        return job.id in self.window_ids

    def attempt(
        self, sched: Scheduler, job: Job, shape: _Shape, rng: np.random.Generator,
        out: list[Decision],
    ) -> Decision | None:  # fmt: skip
        """Try to start ``job``, a job beyond the window: if its whole expected run fits
        around every reservation, as ``_start`` does; if it does not fit now at all, as the
        scheduler tries any job (its Skip says why). None if it fits now but would touch a
        reservation: it waits, out of the queue until the plan changes, told so (in ``out``)
        when that reason is new."""
        if self._stale:
            self._refresh(sched)
        h = self._handle[job.id]
        u = int(self.s_local[self.h_shape[h]])
        if u < 0:
            u = int(self._local_rows(self.h_shape[h : h + 1])[0])
        d = float(self.h_dur[h])
        t_end = sched._now + d
        prof = self.profile
        v = self.view
        c0 = self._c0
        v_total, s_total = _start_now(
            u, self.u_tp[u], int(self.u_min[u]), t_end, self.u_ok[u], v.healthy, v.all_healthy,
            prof.P, prof.C, c0, self._limit, *self._scratch,
        )  # fmt: skip
        need = job.min_tasks
        if s_total >= need:
            return self._start(sched, job, shape, rng, d)
        r = _holder(t_end, c0, prof.E) if v_total >= need else -1
        if r < 0:
            return sched._try(job, shape, rng)
        holder = int(self._w_h[int(prof.r_win[r])])
        if self.h_code[h] != _HELD_BACK or self.h_hold[h] != holder:
            self.h_code[h], self.h_hold[h] = _HELD_BACK, holder
            out.append(Skip(job, self._behind(r)))
        self._held.add(shape.lane)
        return None

    def _start(
        self, sched: Scheduler, job: Job, shape: _Shape, rng: np.random.Generator, d: float
    ) -> Decision:
        """Start ``job`` now on what stays free throughout its expected run ``d``: on every
        node it fits now (``self._c0``), what reservations hold before its run ends is taken
        off the view for the placement (a what-if, undone at once), so the placement policy
        chooses nodes and GPUs among the rest and no reservation moves."""
        prof = self.profile
        sfm, sgm, scpu, smem = self._shadow_arrays
        _shadow(sched._now + d, self._c0, prof.P, sfm, sgm, scpu, smem, *self._scratch)
        view = self.view
        held: list[TaskPlacement] = []
        for x in np.flatnonzero(sfm.any(axis=1) | (scpu > 0) | (smem > 0)).tolist():
            # One claim per (share, memory) held on the node's GPUs; CPU and memory on the first.
            by_amount: dict[tuple[int, int], list[int]] = {}
            for g in np.flatnonzero(sfm[x]).tolist():
                by_amount.setdefault((int(sfm[x, g]), int(sgm[x, g])), []).append(g)
            cpu, mem = int(scpu[x]), int(smem[x])
            for (milli, gmem), gpus in by_amount.items():
                held.append(TaskPlacement(x, tuple(gpus), milli, gmem, cpu, mem))
                cpu = mem = 0
            if cpu or mem:
                held.append(TaskPlacement(x, (), 0, 0, cpu, mem))
        changes = self._changes
        for tp in held:
            view.allocate(tp)
        try:
            decision = sched._try(job, shape, rng)
        finally:
            for tp in reversed(held):
                view.release(tp)
        if type(decision) is not Admit:
            self._changes = changes  # the view is as it was
        return decision

    def started(self, sched: Scheduler, job: Job) -> None:
        """``job`` was admitted: it joins the profile as a running job (or, if running jobs
        were evicted for it, the profile is rebuilt around the reservations as they are and
        the next cycle plans afresh)."""
        r = sched._running[job.id]
        self.by_end.add(r)
        self.window_ids.discard(job.id)
        self._forget(job.id)
        if sched._ended != self._ended_seen:
            self._stale = True
            self._planned_at = -1
        elif not self._stale:
            self.profile.add_running(r, estimated_end(r, self.oracle))
            self._next_change = min(self._next_change, self.profile.next_change())
            if self._planned_at >= 0:
                self._planned_at = self._changes
        # A job that starts takes capacity: no job held back can start because of it.

    def ended(self, job_id: str) -> None:
        """A running job ended (the next cycle plans afresh: the view changed)."""
        self.by_end.ended(job_id)

    def _refresh(self, sched: Scheduler) -> None:
        self.by_end.sync(sched._running, sched._ended)
        self._ended_seen = sched._ended
        self.profile.reset(sched._now, self.by_end, keep_holds=True)
        self._stale = False
        self._wake_held(sched)
