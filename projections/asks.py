"""Broker conversation views: the open asks between runs, and what each run says about itself.

`open_asks` holds every ask not yet closed (the broker's scheduler times them out from it);
`peers` holds each registered run's self-description for peer discovery (`/sessions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlog import Record

from ._rows import recorded_at

ASK_CLOSING = frozenset({"AskReplyTaken", "AskCancelled", "AskTimedOut", "AskWithdrawn"})


@dataclass(frozen=True, slots=True)
class AskRow:
    """One open ask: who asked whom, when, until when, and whether the answer is in."""

    run_id: str
    message_id: str
    to_run_id: str
    sent_at: datetime
    deadline: datetime
    answered: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "message_id": self.message_id,
            "to_run_id": self.to_run_id,
            "sent_at": self.sent_at,
            "deadline": self.deadline,
            "answered": self.answered,
        }


class OpenAsksView:
    """Asking run -> its open asks, oldest first."""

    name = "open_asks"
    version = 1
    row_key = "run_id"  # the one row each record may change
    types = frozenset({"AskSent", "AskAnswered", "RunDeleted", *ASK_CLOSING})

    def initial(self) -> dict[str, tuple[AskRow, ...]]:
        return {}

    def apply(self, state: dict[str, tuple[AskRow, ...]], record: Record) -> dict[str, tuple[AskRow, ...]]:
        d = record.data
        run_id = d["run_id"]
        t = record.type
        if t == "RunDeleted":
            state.pop(run_id, None)
            return state
        rows = state.get(run_id, ())
        if t == "AskSent":
            row = AskRow(
                run_id,
                d["message_id"],
                d["to_run_id"],
                recorded_at(record),
                datetime.fromisoformat(d["deadline"]),
            )
            rows = (*rows, row)
        elif t == "AskAnswered":
            rows = tuple(
                AskRow(r.run_id, r.message_id, r.to_run_id, r.sent_at, r.deadline, True)
                if r.message_id == d["message_id"]
                else r
                for r in rows
            )
        else:
            rows = tuple(r for r in rows if r.message_id != d["message_id"])
        if rows:
            state[run_id] = rows
        else:
            state.pop(run_id, None)
        return state

    def copy(self, state: dict[str, tuple[AskRow, ...]]) -> dict[str, tuple[AskRow, ...]]:
        return dict(state)

    def dump(self, state: dict[str, tuple[AskRow, ...]]) -> list[dict[str, Any]]:
        return [row.to_dict() for row in ask_order(state)]

    def load(self, data: list[dict[str, Any]]) -> dict[str, tuple[AskRow, ...]]:
        state: dict[str, tuple[AskRow, ...]] = {}
        for d in data:
            row = AskRow(
                d["run_id"],
                d["message_id"],
                d["to_run_id"],
                datetime.fromisoformat(d["sent_at"]),
                datetime.fromisoformat(d["deadline"]),
                d["answered"],
            )
            state[row.run_id] = (*state.get(row.run_id, ()), row)
        return state


def ask_order(state: dict[str, tuple[AskRow, ...]]) -> list[AskRow]:
    return sorted(
        (r for rows in state.values() for r in rows), key=lambda r: (r.sent_at, r.run_id, r.message_id)
    )


@dataclass(frozen=True, slots=True)
class PeerInfo:
    """A run's self-description: label, backend, model, working directory and status."""

    run_id: str
    label: str = ""
    backend: str = ""
    model: str = ""
    dir: str = ""
    status: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "label": self.label,
            "backend": self.backend,
            "model": self.model,
            "dir": self.dir,
            "status": self.status,
        }


class PeersView:
    """Run id -> the latest info the run registered (runs that never said anything are absent)."""

    name = "peers"
    version = 1
    row_key = "run_id"  # the one row each record may change
    types = frozenset({"RunRegistered", "RunInfoUpdated", "RunDeleted"})

    def initial(self) -> dict[str, PeerInfo]:
        return {}

    def apply(self, state: dict[str, PeerInfo], record: Record) -> dict[str, PeerInfo]:
        d = record.data
        if record.type == "RunInfoUpdated":
            state[d["run_id"]] = PeerInfo(
                d["run_id"], d["label"], d["backend"], d["model"], d["dir"], d["status"]
            )
        else:  # a new or deleted run starts with no info
            state.pop(d["run_id"], None)
        return state

    def copy(self, state: dict[str, PeerInfo]) -> dict[str, PeerInfo]:
        return dict(state)

    def dump(self, state: dict[str, PeerInfo]) -> list[dict[str, Any]]:
        return [state[k].to_dict() for k in sorted(state)]

    def load(self, data: list[dict[str, Any]]) -> dict[str, PeerInfo]:
        return {
            d["run_id"]: PeerInfo(d["run_id"], d["label"], d["backend"], d["model"], d["dir"], d["status"])
            for d in data
        }
