"""Broker views: the run registry and each run's finish status."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlog import Record

RUN_TYPES = frozenset(
    {
        "RunRegistered",
        "RunRegistrationRefreshed",
        "RunHeartbeat",
        "ControlQueued",
        "ControlDelivered",
        "RunReported",
        "RunFinished",
        "RunReplied",
        "PermissionRequested",
        "PermissionDecided",
        "RunDeleted",
    }
)


@dataclass(frozen=True, slots=True)
class RunRow:
    """One registered run as the registry shows it."""

    run_id: str
    registered_at: datetime | None
    first_seq: int
    last_seen: datetime
    queue_depth: int = 0
    reports: int = 0
    finishes: int = 0
    replies: int = 0
    pending_permissions: tuple[str, ...] = ()
    last_state: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["pending_permissions"] = list(self.pending_permissions)
        return out


@dataclass(frozen=True, slots=True)
class FinishStatus:
    """A run's finishes: how many, the last status and summary."""

    run_id: str
    count: int = 0
    last_status: str = ""
    summary: str = ""
    at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class RunRegistryView:
    """Registered runs: last seen, queue depth, report/finish/reply counts, pending permissions."""

    name = "run_registry"
    version = 1
    types = RUN_TYPES

    def initial(self) -> dict[str, RunRow]:
        return {}

    def apply(self, state: dict[str, RunRow], record: Record) -> dict[str, RunRow]:
        d = record.data
        run_id = d["run_id"]
        t = record.type
        at = record.recorded_at
        if t == "RunRegistered":
            state[run_id] = RunRow(run_id, d["registered_at"] and at, record.seq, at)
            return state
        row = state.get(run_id)
        if row is None:
            return state
        if t == "RunDeleted":
            del state[run_id]
            return state
        rep = dataclasses.replace
        if t == "ControlQueued":
            row = rep(row, queue_depth=row.queue_depth + 1)
        elif t == "ControlDelivered":
            row = rep(row, queue_depth=max(0, row.queue_depth - len(d["message_ids"])))
        else:
            row = rep(row, last_seen=at)
            if t == "RunRegistrationRefreshed":
                row = rep(row, registered_at=at)
            elif t == "RunReported":
                row = rep(row, reports=row.reports + 1, last_state=d["state"])
            elif t == "RunFinished":
                row = rep(row, finishes=row.finishes + 1, last_state=d["status"])
            elif t == "RunReplied":
                row = rep(row, replies=row.replies + 1)
            elif t == "PermissionRequested":
                row = rep(row, pending_permissions=(*row.pending_permissions, d["request_id"]))
            elif t == "PermissionDecided":
                row = rep(
                    row, pending_permissions=tuple(p for p in row.pending_permissions if p != d["request_id"])
                )
        state[run_id] = row
        return state

    def copy(self, state: dict[str, RunRow]) -> dict[str, RunRow]:
        return dict(state)

    def dump(self, state: dict[str, RunRow]) -> list[dict[str, Any]]:
        return [row.to_dict() for row in registry_order(state)]


class FinishStatusView:
    """Per run: how many finishes, the last status and its summary."""

    name = "finish_status"
    version = 1
    types = frozenset({"RunRegistered", "RunFinished", "RunDeleted"})

    def initial(self) -> dict[str, FinishStatus]:
        return {}

    def apply(self, state: dict[str, FinishStatus], record: Record) -> dict[str, FinishStatus]:
        d = record.data
        run_id = d["run_id"]
        if record.type == "RunRegistered":
            state[run_id] = FinishStatus(run_id)
        elif record.type == "RunDeleted":
            state.pop(run_id, None)
        elif run_id in state:
            old = state[run_id]
            state[run_id] = FinishStatus(run_id, old.count + 1, d["status"], d["summary"], record.recorded_at)
        return state

    def copy(self, state: dict[str, FinishStatus]) -> dict[str, FinishStatus]:
        return dict(state)

    def dump(self, state: dict[str, FinishStatus]) -> list[dict[str, Any]]:
        return [state[k].to_dict() for k in sorted(state)]


def registry_order(state: dict[str, RunRow]) -> list[RunRow]:
    return sorted(state.values(), key=lambda r: (r.first_seq, r.run_id))
