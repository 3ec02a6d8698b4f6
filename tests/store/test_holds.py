"""Hardware holds in the store: GPU faults from the health watch and operators' cordons,
on SQLite and PostgreSQL; the inventory's sync never clears either."""

from __future__ import annotations

import pytest

from pg import postgres_server, store_fixture  # noqa: F401  (postgres_server: a fixture)
from suanli.store import Store
from suanli.store import jobs as js
from suanli.store import nodes as sn

NOW = 1_764_000_000_000

store = store_fixture()


def inventory(store: Store) -> None:
    js.sync_inventory(
        store,
        [js.NodeRow(n, 2, "H100", 81920, 96000, 1 << 20, True, "nvml") for n in ("a", "b")],
        [js.GpuRow(n, i, "H100", f"GPU-{n}{i}", 81920) for n in ("a", "b") for i in range(2)],
        NOW,
    )


def test_faults_are_written_once_and_keep_when_first_found(store: Store) -> None:
    inventory(store)
    assert sn.holds(store).faults == {}
    assert sn.set_gpu_faults(store, "a", {0: None, 1: "xid 79"}, NOW) == [(1, "xid 79")]
    assert sn.set_gpu_faults(store, "a", {0: None, 1: "xid 79"}, NOW + 5) == []
    assert sn.set_gpu_faults(store, "a", {1: "ecc: 2 uncorrected"}, NOW + 9) == [
        (1, "ecc: 2 uncorrected")
    ]
    assert sn.holds(store).faults == {("a", 1): ("ecc: 2 uncorrected", NOW)}
    assert sn.set_gpu_faults(store, "a", {7: "lost"}, NOW) == []  # unknown GPU: passed over
    js.sync_inventory(  # the inventory again: the fault stays
        store,
        [js.NodeRow(n, 2, "H100", 81920, 96000, 1 << 20, True, "nvml") for n in ("a", "b")],
        [js.GpuRow(n, i, "H100", f"GPU-{n}{i}", 81920) for n in ("a", "b") for i in range(2)],
        NOW + 10,
    )
    (a, a_gpus), _ = js.list_nodes(store)
    assert [(g.healthy, g.fault) for g in a_gpus] == [(True, None), (False, "ecc: 2 uncorrected")]
    assert sn.set_gpu_faults(store, "a", {1: None}, NOW + 20) == [(1, None)]
    assert sn.holds(store).faults == {}


def test_cordons(store: Store) -> None:
    inventory(store)
    row = sn.set_cordon(store, "b", "cordon", "new firmware", NOW)
    assert (row.cordon, row.cordon_reason) == ("cordon", "new firmware")
    sn.set_cordon(store, "b", "cordon", "firmware 2.1", NOW + 5)  # same hold: since kept
    assert sn.holds(store).cordons == {"b": ("cordon", "firmware 2.1", NOW)}
    sn.set_cordon(store, "b", "drain", "firmware 2.1", NOW + 7)
    assert sn.holds(store).cordons == {"b": ("drain", "firmware 2.1", NOW + 7)}
    with pytest.raises(sn.NodeNotFound, match="no node 'c'"):
        sn.set_cordon(store, "c", "drain", None, NOW)
    with pytest.raises(ValueError, match="cordon, drain or none, got 'reboot'"):
        sn.set_cordon(store, "b", "reboot", None, NOW)
    assert sn.holds(store).cordons == {"b": ("drain", "firmware 2.1", NOW + 7)}
    ((only, only_gpus),) = js.list_nodes(store, "b")  # one node, read alone
    assert (only.name, only.cordon, [g.idx for g in only_gpus]) == ("b", "drain", [0, 1])
    assert js.list_nodes(store, "c") == []
    back = sn.set_cordon(store, "b", None, "ignored", NOW + 9)
    assert (back.cordon, back.cordon_reason) == (None, None)
    assert sn.holds(store).cordons == {}
