"""The projects view: every project not deleted, by id, with its owner, agent and base directory."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlog import Record


@dataclass(frozen=True, slots=True)
class Project:
    """A project owned by a user under an agent (the seed's transport-neutral project row)."""

    id: str
    agent_id: str
    user_id: str
    name: str
    base_dir: str
    description: str = ""
    archived: bool = False
    is_default: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None
    first_seq: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "agent_id": self.agent_id,
            "user_id": self.user_id,
            "name": self.name,
            "base_dir": self.base_dir,
            "description": self.description,
            "archived": self.archived,
            "is_default": self.is_default,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "first_seq": self.first_seq,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Project:
        return cls(
            d["id"], d["agent_id"], d["user_id"], d["name"], d["base_dir"], d["description"], d["archived"],
            d["is_default"], _when(d["created_at"]), _when(d["updated_at"]), d["first_seq"],
        )  # fmt: skip


class ProjectsView:
    """Projects by id; a deleted project leaves the view (its history stays in the log)."""

    name = "projects"
    version = 1
    types = frozenset({"ProjectCreated", "ProjectUpdated", "ProjectArchived", "ProjectDeleted"})

    def initial(self) -> dict[str, Project]:
        return {}

    def apply(self, state: dict[str, Project], record: Record) -> dict[str, Project]:
        d = record.data
        pid = d["project_id"]
        t = record.type
        if t == "ProjectCreated":
            at = _when(d["at"])
            state[pid] = Project(
                pid, d["agent_id"], d["user_id"], d["name"], d["base_dir"], d["description"], False,
                d["is_default"], at, at, record.seq,
            )  # fmt: skip
            return state
        old = state.get(pid)
        if old is None:
            return state
        if t == "ProjectDeleted":
            del state[pid]
        elif t == "ProjectUpdated":
            state[pid] = Project(
                pid, old.agent_id, old.user_id, d["name"], d["base_dir"], d["description"], old.archived,
                old.is_default, old.created_at, _when(d["at"]), old.first_seq,
            )  # fmt: skip
        else:  # ProjectArchived
            state[pid] = Project(
                pid, old.agent_id, old.user_id, old.name, old.base_dir, old.description, True,
                old.is_default, old.created_at, _when(d["at"]), old.first_seq,
            )  # fmt: skip
        return state

    def copy(self, state: dict[str, Project]) -> dict[str, Project]:
        return dict(state)  # rows are frozen: a shallow copy is a snapshot

    def dump(self, state: dict[str, Project]) -> list[dict[str, Any]]:
        return [row.to_dict() for row in project_order(state)]

    def load(self, data: list[dict[str, Any]]) -> dict[str, Project]:
        return {d["id"]: Project.from_dict(d) for d in data}


def project_order(state: dict[str, Project]) -> list[Project]:
    return sorted(state.values(), key=lambda p: (p.first_seq, p.id))


def _when(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)
