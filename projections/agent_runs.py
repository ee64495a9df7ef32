"""The agent runs view: every controller run, where its history lives, its status and its origin."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlog import Record

from ._rows import positional

FORKED = "forked"  # the status of a fork's run until its copied history says otherwise


@dataclass(frozen=True, slots=True)
class AgentRun:
    """One controller run: its stream (where its timeline is folded from) and its last status."""

    run_id: str
    stream: str
    first_seq: int
    controller_id: str = ""
    session_id: str = ""
    title: str = ""
    status: str = ""
    reason: str = ""
    started_at: datetime | None = None
    updated_seq: int = 0
    forked_from: str = ""
    fork_seq: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "stream": self.stream,
            "first_seq": self.first_seq,
            "controller_id": self.controller_id,
            "session_id": self.session_id,
            "title": self.title,
            "status": self.status,
            "reason": self.reason,
            "started_at": self.started_at,
            "updated_seq": self.updated_seq,
            "forked_from": self.forked_from,
            "fork_seq": self.fork_seq,
        }


_run = positional(AgentRun)


class AgentRunsView:
    """Controller runs by id: stream, session, title, status, and the run a fork came from."""

    name = "agent_runs"
    version = 1
    row_key = "run_id"  # the one row each record may change
    types = frozenset({"ForkedFrom", "AgentRunStarted", "AgentRunStatusChanged"})

    def initial(self) -> dict[str, AgentRun]:
        return {}

    def apply(self, state: dict[str, AgentRun], record: Record) -> dict[str, AgentRun]:
        d = record.data
        run_id = d["run_id"]
        t = record.type
        if t == "ForkedFrom":
            state[run_id] = _run(
                run_id, record.stream, record.seq, "", "", "", FORKED, "", None, record.seq,
                d["origin_run_id"], d["at_seq"],
            )  # fmt: skip
            return state
        old = state.get(run_id)
        if t == "AgentRunStarted":
            fork = old if old is not None and old.stream == record.stream else None
            state[run_id] = _run(
                run_id,
                record.stream,
                fork.first_seq if fork else record.seq,
                d["controller_id"],
                d["session_id"],
                d["title"],
                "",
                "",
                datetime.fromisoformat(d["at"]),
                record.seq,
                fork.forked_from if fork else "",
                fork.fork_seq if fork else 0,
            )
        elif old is not None and old.stream == record.stream:
            state[run_id] = _run(
                run_id, old.stream, old.first_seq, old.controller_id, old.session_id, old.title, d["status"],
                d["reason"], old.started_at, record.seq, old.forked_from, old.fork_seq,
            )  # fmt: skip
        return state

    def copy(self, state: dict[str, AgentRun]) -> dict[str, AgentRun]:
        return dict(state)  # rows are frozen: a shallow copy is a snapshot

    def dump(self, state: dict[str, AgentRun]) -> list[dict[str, Any]]:
        return [row.to_dict() for row in agent_run_order(state)]

    def load(self, data: list[dict[str, Any]]) -> dict[str, AgentRun]:
        out = {}
        for d in data:
            started = d["started_at"]
            out[d["run_id"]] = AgentRun(
                d["run_id"], d["stream"], d["first_seq"], d["controller_id"], d["session_id"], d["title"],
                d["status"], d["reason"], None if started is None else datetime.fromisoformat(started),
                d["updated_seq"], d["forked_from"], d["fork_seq"],
            )  # fmt: skip
        return out


def agent_run_order(state: dict[str, AgentRun]) -> list[AgentRun]:
    return sorted(state.values(), key=lambda r: (r.first_seq, r.run_id))
