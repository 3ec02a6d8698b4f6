"""``POST /v1/jobs/{id}/withdraw``: a federation front takes a job back only while it has not
started, through the real server on SQLite and PostgreSQL. A pending job is cancelled with
the front's reason; a running one runs on (409); a plain user's token, the job's own owner's
included, is 403; a bad reason is 422; nothing changes for a refusal."""

from __future__ import annotations

from pathlib import Path

from pg import location_fixture, postgres_server  # noqa: F401  (postgres_server: a fixture)
from serving import PY, hold_gpu, start, submit, tenant_token, wait_state

db_location = location_fixture()


def test_a_front_takes_back_a_pending_job_and_never_a_running_one(
    tmp_path: Path, db_location: str
) -> None:
    srv = start(tmp_path / "state", db_location, gpus=1)
    try:
        user = tenant_token(srv, "vision")
        with srv.client(user) as c, srv.client() as admin:
            holder = hold_gpu(c, 60, max_runtime=3600)
            waiting = submit(c, command=[PY, "-c", "pass"], gpus=1)
            assert wait_state(c, waiting, "pending")["state"] == "pending"

            # Refused, and nothing changes: a user (its owner) may only cancel it.
            r = c.post(f"/v1/jobs/{waiting}/withdraw", json={"reason": "mine"})
            assert r.status_code == 403 and "cancel it instead" in r.json()["error"]
            for body, field in (({"reason": "a\u0000b"}, "reason"), ({"reason": "x" * 501}, "reason"),
                                ({"reason": "ok", "force": True}, "force")):  # fmt: skip
                r = admin.post(f"/v1/jobs/{waiting}/withdraw", json=body)
                assert r.status_code == 422, r.text
                assert field in {f["field"].split(".")[-1] for f in r.json()["fields"]}
            assert admin.post("/v1/jobs/nope/withdraw").status_code == 404
            assert c.get(f"/v1/jobs/{waiting}").json()["job"]["state"] == "pending"

            # The running job runs on.
            r = admin.post(f"/v1/jobs/{holder}/withdraw", json={"reason": "re-routed"})
            assert r.status_code == 409 and r.json()["error"] == (
                f"not withdrawn: job {holder} is running")
            assert c.get(f"/v1/jobs/{holder}").json()["job"]["state"] == "running"

            # The pending one is taken back, with the front's reason and a history event.
            why = "re-routed to us-west: finishes 2.0 h sooner"
            r = admin.post(f"/v1/jobs/{waiting}/withdraw", json={"reason": why})
            assert r.status_code == 200, r.text
            assert (r.json()["state"], r.json()["reason"]) == ("cancelled", why)
            detail = c.get(f"/v1/jobs/{waiting}").json()
            assert detail["attempts"] == []
            assert any(e["kind"] == "withdrawn" and e["detail"] == why for e in detail["history"])
            again = admin.post(f"/v1/jobs/{waiting}/withdraw")
            assert again.status_code == 409 and "is cancelled" in again.json()["error"]
            assert admin.post(f"/v1/jobs/{holder}/cancel").status_code == 202
    finally:
        srv.stop()
