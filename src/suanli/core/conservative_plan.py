"""The compiled side of conservative backfill: the profile of future free capacity and the
plan made on it (``suanli.core.conservative`` holds the contract and drives these kernels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from suanli.core.backfill import node_count
from suanli.core.model import MILLI

if TYPE_CHECKING:
    pass

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
    holds some share.) A plan overtaken by preemption (a job that evicted others took
    capacity a reservation counted on) has pieces below zero: a reservation can hold no more
    than is free now, so the minimum is taken at zero."""
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
            sfm[x, g] = p_fm[x, 0, g] - max(mfm[g], 0)
            sgm[x, g] = p_gm[x, 0, g] - max(mgm[g], 0)
        scpu[x] = p_cpu[x, 0] - max(mc, 0)
        smem[x] = p_mem[x, 0] - max(mm, 0)


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
