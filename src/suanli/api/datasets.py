"""The API's data sets held here: ``/v1/datasets`` (list, put, delete), item 6 of what a
live member tells a federation front (``docs/network.md``, "A live member").

Admin tokens only, reads included: a data set's name says what a tenant works on, and a
front reaches a member with an admin token. A plain user's or a tenant admin's token is 403.
``PUT /v1/datasets/{name}`` records a copy here, ``present`` or ``arriving`` (expected
``arrives_in_s`` from now, from ``source``), with its size; a copy already present stays
present when a front says one is arriving (``suanli.store.datasets``). ``DELETE`` forgets it
(the data evicted): 404 if there was none.
"""

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from suanli.api import schemas as s
from suanli.api.errors import ApiError
from suanli.store import Store
from suanli.store import datasets as ds
from suanli.store.tokens import Principal

DatasetName = Annotated[str, PathParam(max_length=200, pattern=f"^{ds.NAME}$")]
MAX_ARRIVAL_S = 365 * 86400.0


class CopyIn(BaseModel):
    """A copy of a data set here: its size, and whether it is here or on its way."""

    model_config = ConfigDict(extra="forbid")

    gb: Annotated[float, Field(ge=0, le=ds.MAX_GB, allow_inf_nan=False)]
    state: Literal["present", "arriving"] = "present"
    arrives_in_s: Annotated[float | None, Field(ge=0, le=MAX_ARRIVAL_S, allow_inf_nan=False)] = None
    """For an arriving copy: seconds from now until it is expected here."""
    source: Annotated[
        str | None, Field(max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
    ] = None
    """Where an arriving copy comes from (a member's name)."""


class CopyOut(BaseModel):
    name: str
    gb: float
    state: str
    arrives_at: str | None
    source: str | None
    updated_at: str
    updated_by: str


class CopyList(BaseModel):
    datasets: list[CopyOut]


def _out(rec: ds.CopyRecord) -> CopyOut:
    return CopyOut(name=rec.name, gb=rec.size_gb, state=rec.state, arrives_at=s.iso(rec.arrives_ms),
                   source=rec.source, updated_at=s.iso(rec.updated_ms) or "",
                   updated_by=rec.updated_by)  # fmt: skip


def install_datasets(app: FastAPI, store: Store, *, who: Any, clock_ms: Callable[[], int]) -> None:
    """Add the ``/v1/datasets`` routes to ``app`` (``who``: the dependency that gives the
    request's principal, as the other routes use)."""

    def admin(p: Annotated[Principal, Depends(who)]) -> Principal:
        if not p.admin:
            raise ApiError(403, "the data sets a member holds are for admin tokens (a "
                           "federation front) only")  # fmt: skip
        return p

    Admin = Annotated[Principal, Depends(admin)]

    @app.get("/v1/datasets", tags=["federation"])
    def list_datasets(who: Admin) -> CopyList:
        """The data sets this member holds a copy of, or is being sent one of."""
        return CopyList(datasets=[_out(r) for r in ds.list_copies(store)])

    @app.put("/v1/datasets/{name}", tags=["federation"])
    def put_dataset(name: DatasetName, body: CopyIn, who: Admin) -> CopyOut:
        """Record a copy of data set ``name`` here; what is stored is answered (a present
        copy stays present)."""
        if body.state == "arriving" and body.arrives_in_s is None:
            raise ApiError(422, "an arriving copy needs arrives_in_s", fields=[s.ErrorField(
                field="arrives_in_s", problem="required where state is arriving")])  # fmt: skip
        if body.state == "present" and body.arrives_in_s is not None:
            raise ApiError(422, "a present copy has no arrives_in_s", fields=[s.ErrorField(
                field="arrives_in_s", problem="only for state arriving")])  # fmt: skip
        now = clock_ms()
        arrives = None if body.arrives_in_s is None else now + round(body.arrives_in_s * 1000)
        rec = ds.put_copy(store, name=name, size_gb=body.gb, state=body.state,
                          arrives_ms=arrives, source=body.source, by=who.user, now_ms=now)  # fmt: skip
        return _out(rec)

    @app.delete("/v1/datasets/{name}", tags=["federation"])
    def delete_dataset(name: DatasetName, who: Admin) -> CopyList:
        """Forget the copy of data set ``name`` here (the data evicted)."""
        if not ds.delete_copy(store, name):
            raise ApiError(404, f"no copy of data set {name!r} here")
        return CopyList(datasets=[_out(r) for r in ds.list_copies(store)])
