"""The project aggregate as a pure decider: ownership, the route-agent binding, the opaque not-found."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlog import Event, EventLog, Record
from eventlog.events import ProjectArchived, ProjectCreated, ProjectDeleted, ProjectUpdated

from .._aggregate import AggregateActor, Decision, Execute, folded
from .._errors import ProjectError, ProjectNotFoundError


@dataclass(frozen=True, slots=True)
class ProjectState:
    """What the log says about one project (`live`: created and not deleted)."""

    id: str
    live: bool = False
    agent_id: str = ""
    user_id: str = ""
    name: str = ""
    base_dir: str = ""
    description: str = ""
    archived: bool = False

    def visible_to(self, user_id: str, agent_id: str) -> bool:
        """Whether the project exists, is the user's, and is bound to this route agent."""
        return self.live and self.user_id == user_id and self.agent_id == agent_id


# -- commands ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreateProject:
    user_id: str
    agent_id: str
    name: str
    base_dir: str
    description: str = ""
    is_default: bool = False  # ensure: an existing project is kept as it is


@dataclass(frozen=True, slots=True)
class UpdateProject:
    user_id: str
    agent_id: str
    name: str | None = None
    base_dir: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ArchiveProject:
    user_id: str
    agent_id: str


@dataclass(frozen=True, slots=True)
class DeleteProject:
    user_id: str
    agent_id: str


ProjectCommand = CreateProject | UpdateProject | ArchiveProject | DeleteProject


def decide(state: ProjectState, command: ProjectCommand, now: datetime) -> Decision:
    """The events a command produces, and the error the caller gets (nothing is recorded then)."""
    if isinstance(command, CreateProject):
        c = command
        if state.live:
            return Decision() if c.is_default else Decision(error=ProjectError("project already exists"))
        created = ProjectCreated(
            state.id, c.agent_id, c.user_id, c.name, c.base_dir, c.description, c.is_default, now
        )
        return Decision([created])
    # Missing, foreign or bound to another agent: one answer, so a probe learns nothing.
    if not state.visible_to(command.user_id, command.agent_id):
        return Decision(error=ProjectNotFoundError(state.id))
    if isinstance(command, UpdateProject):
        name = state.name if command.name is None else command.name
        base_dir = state.base_dir if command.base_dir is None else command.base_dir
        description = state.description if command.description is None else command.description
        if (name, base_dir, description) == (state.name, state.base_dir, state.description):
            return Decision()
        return Decision([ProjectUpdated(state.id, name, base_dir, description, now)])
    if isinstance(command, ArchiveProject):
        return Decision() if state.archived else Decision([ProjectArchived(state.id, now)])
    return Decision([ProjectDeleted(state.id, now)])


def evolve(state: ProjectState, event: Event) -> ProjectState:
    """The state after one recorded event."""
    if isinstance(event, ProjectCreated):
        c = event
        return ProjectState(state.id, True, c.agent_id, c.user_id, c.name, c.base_dir, c.description)
    if isinstance(event, ProjectUpdated):
        return dataclasses.replace(
            state, name=event.name, base_dir=event.base_dir, description=event.description
        )
    if isinstance(event, ProjectArchived):
        return dataclasses.replace(state, archived=True)
    if isinstance(event, ProjectDeleted):
        return ProjectState(state.id)
    return state


def load(log: EventLog, project_id: str) -> ProjectState:
    """Fold the project's stream as it is now."""
    state = PROJECTS.initial(project_id)
    for record in log.read(f"{PROJECTS.category}-{project_id}"):
        state = folded(state, record, evolve)
    return state


class ProjectAggregate:
    category = "project"

    def initial(self, id: str) -> ProjectState:
        return ProjectState(id)

    def decide(self, state: ProjectState, command: ProjectCommand, now: datetime) -> Decision:
        return decide(state, command, now)

    def evolve(self, state: ProjectState, event: Event) -> ProjectState:
        return evolve(state, event)


PROJECTS = ProjectAggregate()


class ProjectActor(AggregateActor[ProjectState]):
    # A new project gets a fresh id: deciding on the initial state saves reading an empty
    # stream (a default project's id is derived, so it is usually there already: read it).
    lazy_start = True

    def creates(self, message: object) -> bool:
        if not isinstance(message, Execute) or not isinstance(message.command, CreateProject):
            return False
        return not message.command.is_default

    def execute(self, command: Any, meta: dict[str, Any] | None = None) -> tuple[Any, list[Record]]:
        # "Nothing to record" must be decided on the latest state: a cache another process has
        # moved past would otherwise swallow a change (an append would conflict; a no-op cannot).
        if self.loaded:
            self.refresh()
        return super().execute(command, meta)
