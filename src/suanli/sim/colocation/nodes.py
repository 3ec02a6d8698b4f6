"""Where the co-location model's GPUs are: free GPUs per node, each job's workers per node,
and the replicas that sit beside a job's workers.

A job that may not span nodes (its trace ran it on one) keeps every worker on one node; a
job that may spreads over several. Placement packs: a one-node job takes the fitting node
with the fewest free GPUs, a replica the node with the fewest free GPUs, so that whole
nodes stay free for the jobs that need them; a spreading job takes the nodes with the most
free GPUs first (the fewest nodes). A job gives workers back first where it has fewest,
and on a node first the workers that host no replica: a worker that does host one leaves
its GPU to the replica, which keeps it.
"""

from __future__ import annotations

import numpy as np


class Nodes:
    """Free GPUs of ``count`` nodes of ``per_node`` GPUs, and who holds what where."""

    def __init__(self, count: int, per_node: int) -> None:
        self.per_node = per_node
        self.free = np.full(count, per_node, np.int64)
        self.job: dict[int, dict[int, int]] = {}
        self.hosted: dict[int, dict[int, int]] = {}

    @property
    def total(self) -> int:
        return int(self.free.sum())

    def room(self, spread: bool) -> int:
        """The most workers one job could take now."""
        return self.total if spread else int(self.free.max(initial=0))

    def reserve(self, gpus: int) -> list[int]:
        """Take ``gpus`` GPUs, node by node from the first (a partitioned pool); returns the
        node of each."""
        out: list[int] = []
        for n in range(len(self.free)):
            k = min(int(self.free[n]), gpus - len(out))
            self.free[n] -= k
            out += [n] * k
        return out

    def place(self, j: int, w: int, spread: bool) -> None:
        """Job ``j`` takes ``w`` workers (the caller checked ``room``)."""
        at: dict[int, int] = {}
        if spread:
            order = np.lexsort((np.arange(len(self.free)), -self.free))
            left = w
            for n in order:
                if not left:
                    break
                k = min(int(self.free[n]), left)
                if k:
                    at[int(n)] = k
                    left -= k
            assert left == 0, "placed past the free GPUs"
        else:
            n = self._best_fit(w)
            assert n >= 0, "no node fits"
            at[n] = w
        for n, k in at.items():
            self.free[n] -= k
        self.job[j] = at
        self.hosted[j] = {}

    def grow(self, j: int, k: int, spread: bool) -> int:
        """Up to ``k`` more workers for ``j``: on its nodes first, then (spreading) on the
        nodes with the most free GPUs; returns how many it got."""
        at = self.job[j]
        got = 0
        for n in sorted(at):
            add = min(int(self.free[n]), k - got)
            at[n] += add
            self.free[n] -= add
            got += add
        if spread and got < k:
            order = np.lexsort((np.arange(len(self.free)), -self.free))
            for n in order:
                add = min(int(self.free[n]), k - got)
                if add <= 0:
                    break
                at[int(n)] = at.get(int(n), 0) + add
                self.free[n] -= add
                got += add
        return got

    def shrink(self, j: int, k: int) -> list[tuple[int, int]]:
        """``j`` gives back ``k`` workers; returns ``(node, replicas)`` whose host worker left
        (their GPUs stay held, by the replicas alone)."""
        at, host = self.job[j], self.hosted[j]
        moved: list[tuple[int, int]] = []
        left = k
        for n in sorted(at, key=lambda n: (at[n], n)):
            if not left:
                break
            r = min(at[n], left)
            plain = at[n] - host.get(n, 0)
            gone_hosts = max(0, r - plain)
            at[n] -= r
            self.free[n] += r - gone_hosts
            if gone_hosts:
                host[n] -= gone_hosts
                moved.append((n, gone_hosts))
                if not host[n]:
                    del host[n]
            if not at[n]:
                del at[n]
            left -= r
        return moved

    def release(self, j: int) -> list[tuple[int, int]]:
        """``j`` gives back every worker; returns the replicas left alone, as ``shrink``."""
        moved = self.shrink(j, sum(self.job[j].values()))
        del self.job[j]
        del self.hosted[j]
        return moved

    def host_room(self, j: int) -> list[tuple[int, int]]:
        """``(node, workers without a replica)`` of job ``j``."""
        at, host = self.job[j], self.hosted[j]
        return [(n, at[n] - host.get(n, 0)) for n in sorted(at) if at[n] > host.get(n, 0)]

    def host(self, j: int, n: int) -> None:
        self.hosted[j][n] = self.hosted[j].get(n, 0) + 1

    def unhost(self, j: int, n: int) -> None:
        self.hosted[j][n] -= 1
        if not self.hosted[j][n]:
            del self.hosted[j][n]

    def take_replica(self) -> int:
        """A GPU for a replica of its own: on the node with the fewest free GPUs (-1: none)."""
        return self._best_fit(1)

    def drop_replica(self, n: int) -> None:
        self.free[n] += 1

    def _best_fit(self, w: int) -> int:
        ok = np.flatnonzero(self.free >= w)
        if not len(ok):
            return -1
        return int(ok[np.argmin(self.free[ok])])
