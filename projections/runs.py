"""Broker views: the run registry and each run's finish status."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlog import Record

from ._rows import positional, recorded_at

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
        "RunTokenRevoked",
        "RunRekeyed",
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
    permission_request_count: int = 0  # distinct request ids since registration (see below)
    # The latest RECENT_PERMISSIONS distinct request ids, oldest first: a repeat of one of them
    # (an agent's retry) is not counted again. The window keeps a long-lived run's row small.
    recent_permission_requests: tuple[str, ...] = ()
    # Who created the run (RunRegistered's origin, by and by_credential; "" in older records),
    # and whether its token is revoked now.
    origin: str = ""
    created_by: str = ""
    created_by_credential: str = ""
    revoked: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "registered_at": self.registered_at,
            "first_seq": self.first_seq,
            "last_seen": self.last_seen,
            "queue_depth": self.queue_depth,
            "reports": self.reports,
            "finishes": self.finishes,
            "replies": self.replies,
            "pending_permissions": list(self.pending_permissions),
            "last_state": self.last_state,
            "permission_request_count": self.permission_request_count,
            "recent_permission_requests": list(self.recent_permission_requests),
            "origin": self.origin,
            "created_by": self.created_by,
            "created_by_credential": self.created_by_credential,
            "revoked": self.revoked,
        }


@dataclass(frozen=True, slots=True)
class FinishStatus:
    """A run's finishes: how many, the last status and summary."""

    run_id: str
    count: int = 0
    last_status: str = ""
    summary: str = ""
    at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "count": self.count,
            "last_status": self.last_status,
            "summary": self.summary,
            "at": self.at,
        }


RECENT_PERMISSIONS = 32  # latest permission requests a run's state and registry row remember

_row = positional(RunRow)
_finish = positional(FinishStatus)


class RunRegistryView:
    """Registered runs: last seen, queue depth, report/finish/reply counts, pending permissions."""

    name = "run_registry"
    version = 5  # 2: rows hold the distinct permission request ids; 3: a count and a window of them;
    # 4: a window of 32 (RECENT_PERMISSIONS), not 128; 5: who created the run, and its revocation
    row_key = "run_id"  # the one row each record may change
    types = RUN_TYPES

    def initial(self) -> dict[str, RunRow]:
        return {}

    def apply(self, state: dict[str, RunRow], record: Record) -> dict[str, RunRow]:
        # Rows are built positionally: dataclasses.replace costs several times more, per event.
        d = record.data
        run_id = d["run_id"]
        t = record.type
        if t == "RunHeartbeat":
            r = state.get(run_id)
            if r is not None:
                state[run_id] = _row(
                    run_id, r.registered_at, r.first_seq, recorded_at(record), r.queue_depth, r.reports,
                    r.finishes, r.replies, r.pending_permissions, r.last_state, r.permission_request_count,
                    r.recent_permission_requests, r.origin, r.created_by, r.created_by_credential, r.revoked,
                )  # fmt: skip
            return state
        if t == "RunRegistered":
            at = recorded_at(record)
            # Who created it: records older than these fields have none.
            state[run_id] = _row(
                run_id, d["registered_at"] and at, record.seq, at, 0, 0, 0, 0, (), "", 0, (),
                d.get("origin", ""), d.get("by", ""), d.get("by_credential", ""), False,
            )  # fmt: skip
            return state
        r = state.get(run_id)
        if r is None:
            return state
        if t == "RunDeleted":
            del state[run_id]
            return state
        if t == "ControlQueued":
            state[run_id] = _row(
                run_id, r.registered_at, r.first_seq, r.last_seen, r.queue_depth + 1, r.reports,
                r.finishes, r.replies, r.pending_permissions, r.last_state, r.permission_request_count,
                r.recent_permission_requests, r.origin, r.created_by, r.created_by_credential, r.revoked,
            )  # fmt: skip
            return state
        if t == "ControlDelivered":
            depth = max(0, r.queue_depth - len(d["message_ids"]))
            state[run_id] = _row(
                run_id, r.registered_at, r.first_seq, r.last_seen, depth, r.reports, r.finishes,
                r.replies, r.pending_permissions, r.last_state, r.permission_request_count,
                r.recent_permission_requests, r.origin, r.created_by, r.created_by_credential, r.revoked,
            )  # fmt: skip
            return state
        if t == "RunTokenRevoked" or t == "RunRekeyed":
            # An operator's act, not the run being seen: last_seen stays.
            state[run_id] = _row(
                run_id, r.registered_at, r.first_seq, r.last_seen, r.queue_depth, r.reports, r.finishes,
                r.replies, r.pending_permissions, r.last_state, r.permission_request_count,
                r.recent_permission_requests, r.origin, r.created_by, r.created_by_credential,
                t == "RunTokenRevoked",
            )  # fmt: skip
            return state
        at = recorded_at(record)
        registered, reports, finishes, replies = r.registered_at, r.reports, r.finishes, r.replies
        pending, last_state = r.pending_permissions, r.last_state
        count, requested = r.permission_request_count, r.recent_permission_requests
        if t == "RunReported":
            reports += 1
            last_state = d["state"]
        elif t == "RunFinished":
            finishes += 1
            last_state = d["status"]
        elif t == "RunRegistrationRefreshed":
            registered = at
        elif t == "RunReplied":
            replies += 1
        elif t == "PermissionRequested":
            pending = (*pending, d["request_id"])
            if d["request_id"] not in requested:
                count += 1
                requested = (*requested[1 - RECENT_PERMISSIONS :], d["request_id"])
        elif t == "PermissionDecided":
            pending = tuple(p for p in pending if p != d["request_id"])
        state[run_id] = _row(
            run_id, registered, r.first_seq, at, r.queue_depth, reports, finishes, replies, pending,
            last_state, count, requested, r.origin, r.created_by, r.created_by_credential, r.revoked,
        )  # fmt: skip
        return state

    def copy(self, state: dict[str, RunRow]) -> dict[str, RunRow]:
        return dict(state)

    def dump(self, state: dict[str, RunRow]) -> list[dict[str, Any]]:
        return [row.to_dict() for row in registry_order(state)]

    def load(self, data: list[dict[str, Any]]) -> dict[str, RunRow]:
        rows = (
            RunRow(
                d["run_id"], _when(d["registered_at"]), d["first_seq"], _at(d["last_seen"]), d["queue_depth"],
                d["reports"], d["finishes"], d["replies"], tuple(d["pending_permissions"]), d["last_state"],
                d["permission_request_count"], tuple(d["recent_permission_requests"]),
                d.get("origin", ""), d.get("created_by", ""), d.get("created_by_credential", ""),
                bool(d.get("revoked", False)),
            )
            for d in data
        )  # fmt: skip
        return {row.run_id: row for row in rows}


class FinishStatusView:
    """Per run: how many finishes, the last status and its summary."""

    name = "finish_status"
    version = 1
    row_key = "run_id"  # the one row each record may change
    types = frozenset({"RunRegistered", "RunFinished", "RunDeleted"})

    def initial(self) -> dict[str, FinishStatus]:
        return {}

    def apply(self, state: dict[str, FinishStatus], record: Record) -> dict[str, FinishStatus]:
        d = record.data
        run_id = d["run_id"]
        if record.type == "RunRegistered":
            state[run_id] = _finish(run_id, 0, "", "", None)
        elif record.type == "RunDeleted":
            state.pop(run_id, None)
        elif run_id in state:
            old = state[run_id]
            state[run_id] = _finish(run_id, old.count + 1, d["status"], d["summary"], recorded_at(record))
        return state

    def copy(self, state: dict[str, FinishStatus]) -> dict[str, FinishStatus]:
        return dict(state)

    def dump(self, state: dict[str, FinishStatus]) -> list[dict[str, Any]]:
        return [state[k].to_dict() for k in sorted(state)]

    def load(self, data: list[dict[str, Any]]) -> dict[str, FinishStatus]:
        return {
            d["run_id"]: FinishStatus(d["run_id"], d["count"], d["last_status"], d["summary"], _when(d["at"]))
            for d in data
        }


def registry_order(state: dict[str, RunRow]) -> list[RunRow]:
    return sorted(state.values(), key=lambda r: (r.first_seq, r.run_id))


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _when(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)
