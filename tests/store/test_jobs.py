"""The control plane's tables: jobs, attempts, GPU claims and tokens, on SQLite and PostgreSQL.

The double-allocation guard is tested against the database itself: claims are inserted
directly, bypassing the scheduler, and the database must refuse the one too many.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from pg import postgres_server, store_fixture  # noqa: F401  (postgres_server: a fixture)
from suanli.store import Store
from suanli.store import jobs as js
from suanli.store.schema import gpu_claims, gpus, job_events
from suanli.store.tokens import TokenError, authenticate, create_token, list_tokens, revoke_token

NOW = 1_764_000_000_000


store = store_fixture()


def inventory(store: Store, n_gpus: int = 2) -> None:
    js.sync_inventory(
        store,
        [js.NodeRow("n0", n_gpus, "H100", 81920, 96000, 1 << 20, True, "declared")],
        [js.GpuRow("n0", i, "H100", f"virtual-{i}", 81920) for i in range(n_gpus)],
        NOW,
    )


def submit(store: Store, tenant: str = "vision", user: str = "ana") -> js.JobRecord:
    return js.submit_job(
        store,
        spec={"command": ["true"]},
        tenant=tenant,
        user=user,
        name="j",
        queue=tenant,
        priority_class="normal",
        now_ms=NOW,
    )


def task(node: str, gpus: list[int], milli: int, i: int = 0) -> dict[str, object]:
    return {
        "task": i,
        "node": node,
        "gpus": gpus,
        "gpu_milli": milli,
        "gpu_memory_mib": 0,
        "cpu_milli": 1000,
        "memory_mib": 1024,
    }


def used(store: Store) -> dict[tuple[str, int], int]:
    with store.read() as conn:
        return {(r.node, r.idx): r.used_milli for r in conn.execute(sa.select(gpus))}


def test_submissions_are_numbered_and_listed_per_tenant_in_pages(store: Store) -> None:
    a = submit(store)
    b = submit(store, tenant="nlp")
    c = submit(store)
    assert (a.id, b.id, c.id) == (str(a.seq), str(b.seq), str(c.seq))
    assert a.state == "pending" and a.spec == {"command": ["true"]}
    assert [j.id for j in js.list_jobs(store, tenant="vision")] == [a.id, c.id]
    page = js.list_jobs(store, limit=2)
    assert [j.id for j in page] == [a.id, b.id]
    assert [j.id for j in js.list_jobs(store, after=page[-1].seq)] == [c.id]
    assert js.get_job(store, b.id, tenant="vision") is None  # another tenant's: not found
    assert js.get_job(store, b.id) is not None
    assert [e.kind for e in js.job_history(store, a.id)] == ["submitted"]
    with pytest.raises(js.JobStoreError, match="unknown state"):
        js.list_jobs(store, states=["sleeping"])


def test_a_gpu_share_cannot_be_claimed_twice(store: Store) -> None:
    inventory(store)
    a, b, c = submit(store), submit(store), submit(store)
    with store.begin() as conn:
        js.admit_attempt(conn, a.id, 1, [task("n0", [0], 600)], NOW)
    with store.begin() as conn:
        js.admit_attempt(conn, b.id, 1, [task("n0", [0], 400)], NOW)
    assert used(store) == {("n0", 0): 1000, ("n0", 1): 0}
    # One milli too many on GPU 0: the database refuses, and nothing of c is written.
    with pytest.raises(sa.exc.IntegrityError):
        with store.begin() as conn:
            js.admit_attempt(conn, c.id, 1, [task("n0", [1, 0], 1000)], NOW)
    assert used(store) == {("n0", 0): 1000, ("n0", 1): 0}
    assert js.get_job(store, c.id).state == "pending"  # type: ignore[union-attr]
    # Even a raw insert past the scheduler's code is refused.
    with pytest.raises(sa.exc.IntegrityError):
        with store.begin() as conn:
            conn.execute(
                sa.insert(gpu_claims).values(
                    job_id=a.id, attempt=1, task=1, node="n0", idx=0, milli=1
                )
            )
    # Ending an attempt gives its share back; then c fits.
    with store.begin() as conn:
        js.end_attempt(conn, a.id, 1, NOW, outcome="succeeded", exit_code=0, detail="ok")
    assert used(store)[("n0", 0)] == 400
    with store.begin() as conn:
        js.admit_attempt(conn, c.id, 1, [task("n0", [1], 1000), task("n0", [0], 600, 1)], NOW)
    assert used(store) == {("n0", 0): 1000, ("n0", 1): 1000}
    assert js.claims(store) == {("n0", 0): 1000, ("n0", 1): 1000}


def test_attempt_lifecycle_and_events(store: Store) -> None:
    inventory(store)
    a = submit(store)
    with store.begin() as conn:
        js.admit_attempt(conn, a.id, 1, [task("n0", [0, 1], 1000)], NOW)
    handles = [{"pid": 1, "task": 0}]
    with store.begin() as conn:
        js.attempt_started(conn, a.id, 1, handles, NOW + 5)
    live = js.live_attempts(store)
    assert [(x.job_id, x.state, x.handles) for x in live] == [(a.id, "running", handles)]
    assert js.get_job(store, a.id).state == "running"  # type: ignore[union-attr]
    with store.begin() as conn:
        js.end_attempt(conn, a.id, 1, NOW + 9, outcome="succeeded", exit_code=0, detail="ok")
        js.set_job_state(conn, a.id, "succeeded", NOW + 9, exit_code=0)
    assert js.live_attempts(store) == []
    assert [x.attempt for x in js.unmetered_attempts(store)] == [1]
    js.mark_metered(store, a.id, 1)
    assert js.unmetered_attempts(store) == []
    kinds = [e.kind for e in js.job_history(store, a.id)]
    assert kinds == ["submitted", "admitted", "running", "succeeded"]
    with pytest.raises(sa.exc.DBAPIError):  # history is append-only
        with store.begin() as conn:
            conn.execute(sa.delete(job_events))


def test_cancel_requests(store: Store) -> None:
    a = submit(store)
    rec = js.request_cancel(store, a.id, NOW, "ana")
    assert rec.cancel_requested
    assert [j.id for j in js.cancel_requests(store)] == [a.id]
    with pytest.raises(js.JobStoreError, match="no job"):
        js.request_cancel(store, "999", NOW, "ana")


def test_tokens_are_stored_hashed_and_revocable(store: Store) -> None:
    token, info = create_token(
        store, name="ci", role="user", tenant="vision", user="ana", now_ms=NOW
    )
    assert token.startswith("sl_") and len(token) > 40
    with store.read() as conn:
        stored = " ".join(
            str(v) for row in conn.execute(sa.text("SELECT * FROM api_tokens")) for v in row
        )
    assert token not in stored
    who = authenticate(store, token)
    assert who is not None and (who.role, who.tenant, who.user) == ("user", "vision", "ana")
    assert who.sees("vision") and not who.sees("nlp")
    assert who.may_cancel("vision", "ana") and not who.may_cancel("vision", "bo")
    assert authenticate(store, token + "x") is None
    assert authenticate(store, "nonsense") is None
    assert revoke_token(store, info.id, NOW + 1)
    assert authenticate(store, token) is None
    assert [t.revoked_ms for t in list_tokens(store)] == [NOW + 1]
    with pytest.raises(TokenError, match="needs a tenant"):
        create_token(store, name="x", role="user", tenant=None, user="ana", now_ms=NOW)
    with pytest.raises(TokenError, match="role"):
        create_token(store, name="x", role="root", tenant="t", user="ana", now_ms=NOW)
