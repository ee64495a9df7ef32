"""Projects: the agent seed's ProjectStore over event-sourced projects (`project-<id>`)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Final

import orjson

from eventlog import Clock, EventLog
from projections import Views
from projections.projects import Project, project_order

from .._aggregate import Execute
from .._directory import Directory
from .._errors import ProjectNotFoundError, WorkspaceSetupError
from .keys import new_session_id
from .project_decider import (
    PROJECTS,
    ArchiveProject,
    CreateProject,
    DeleteProject,
    ProjectActor,
    UpdateProject,
    load,
)
from .workspace import StrPath, ensure_project_dir, setup_user_workspace, user_agent_dir

DEFAULT_PROJECT_NAME: Final = "default"
# Default project ids are derived from (agent, user), so ensuring one is idempotent across
# threads and processes: two creators race for one stream, and the loser finds the winner's.
_DEFAULT_NAMESPACE: Final = uuid.UUID("5d1f0c6e-8a43-4f0e-9d5b-3c6a1e2f7b90")

Authorize = Callable[[str, str], object]


def default_project_id(agent_id: str, user_id: str) -> str:
    """The id of the default project of (agent, user): a UUIDv5 of both, unambiguously joined."""
    return str(uuid.uuid5(_DEFAULT_NAMESPACE, orjson.dumps([agent_id, user_id]).decode()))


class Projects:
    """Project use cases with ownership, the route-agent binding and workspace containment.

    Every CRUD call first runs `authorize(user_id, agent_id)`: an exception it raises is the
    caller's answer, unchanged, and nothing else runs. A missing project, another user's, and
    one bound to another agent all raise the same ProjectNotFoundError. A project's base_dir
    must lie in the per-(user, agent) area of `workspace` (`<workspace>/users/<u>/agents/<a>`).
    `ensure` and `resolve` serve the runtime and authorize nothing.
    """

    def __init__(
        self,
        log: EventLog,
        clock: Clock,
        views: Views,
        *,
        workspace: StrPath | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        self._log = log
        self._clock = clock
        self._views = views
        self.workspace = workspace
        self.authorize = authorize
        self.actors = Directory(lambda id: ProjectActor.start(log, clock, PROJECTS, id), clock)

    # -- the CRUD use cases ----------------------------------------------------------------

    def create(
        self, user_id: str, agent_id: str, name: str, base_dir: StrPath, description: str | None = None
    ) -> Project:
        """Create a project after checking that base_dir is inside the agent's workspace."""
        self._authorize(user_id, agent_id)
        clean = ensure_project_dir(base_dir, self._agent_root(user_id, agent_id))
        project_id = new_session_id(self._clock)
        command = CreateProject(user_id, agent_id, name, clean, description or "")
        return self._execute(project_id, command)

    def get(self, user_id: str, agent_id: str, project_id: str) -> Project:
        self._authorize(user_id, agent_id)
        return self._visible(project_id, user_id, agent_id)

    def list(self, user_id: str, agent_id: str, include_archived: bool = False) -> list[Project]:
        """The agent's projects owned by the user, in creation order."""
        self._authorize(user_id, agent_id)
        return list(self._owned(user_id, agent_id, include_archived))

    def update(
        self,
        user_id: str,
        agent_id: str,
        project_id: str,
        *,
        name: str | None = None,
        base_dir: StrPath | None = None,
        description: str | None = None,
    ) -> Project:
        """Merge the given fields into an owned project; a new base_dir is checked again."""
        self._authorize(user_id, agent_id)
        self._visible(project_id, user_id, agent_id)  # not found before anything is validated
        clean = None
        if base_dir is not None:
            clean = ensure_project_dir(base_dir, self._agent_root(user_id, agent_id))
        command = UpdateProject(user_id, agent_id, name, clean, description)
        return self._execute(project_id, command)

    def archive(self, user_id: str, agent_id: str, project_id: str) -> Project:
        """Archive an owned project: listed only with `include_archived`."""
        self._authorize(user_id, agent_id)
        return self._execute(project_id, ArchiveProject(user_id, agent_id))

    def delete(self, user_id: str, agent_id: str, project_id: str) -> None:
        """Delete an owned project (its history stays in the log)."""
        self._authorize(user_id, agent_id)
        self.actors.ask(project_id, Execute(DeleteProject(user_id, agent_id), {"actor": user_id}))

    # -- the runtime's resolver and ensurer ------------------------------------------------

    def ensure(self, agent_id: str, user_id: str) -> str:
        """The pair's project: the first one listed, or else a default one created with its workspace."""
        existing = self._owned(user_id, agent_id)
        if existing:
            return existing[0].id
        home = self._agent_root(user_id, agent_id)
        project_id = default_project_id(agent_id, user_id)
        command = CreateProject(user_id, agent_id, DEFAULT_PROJECT_NAME, home, is_default=True)
        self.actors.ask(project_id, Execute(command, {"actor": "runtime"}))
        return project_id

    def resolve(self, project_id: str, user_id: str) -> str:
        """The base directory of the user's project (ProjectNotFoundError for anyone else's)."""
        state = load(self._log, project_id)
        if not state.live or state.user_id != user_id:
            raise ProjectNotFoundError(project_id)
        return state.base_dir

    # -- plumbing --------------------------------------------------------------------------

    def _owned(self, user_id: str, agent_id: str, include_archived: bool = False) -> Sequence[Project]:
        def owned(state: dict[str, Project]) -> Sequence[Project]:
            return [
                p
                for p in project_order(state)
                if p.user_id == user_id and p.agent_id == agent_id and (include_archived or not p.archived)
            ]

        found: Sequence[Project] = self._views.runner.read("projects", owned)
        return found

    def _authorize(self, user_id: str, agent_id: str) -> None:
        if self.authorize is not None:
            self.authorize(user_id, agent_id)

    def _agent_root(self, user_id: str, agent_id: str) -> str:
        """The per-(user, agent) area, created with the user's home if it does not exist yet."""
        if self.workspace is None:
            raise WorkspaceSetupError("no workspace directory is configured")
        setup_user_workspace(self.workspace, user_id, agent_id)
        return user_agent_dir(os.fspath(self.workspace), user_id, agent_id)

    def _visible(self, project_id: str, user_id: str, agent_id: str) -> Project:
        row: Project | None = self._views.runner.read("projects", lambda s: s.get(project_id))
        if row is None or row.user_id != user_id or row.agent_id != agent_id:
            raise ProjectNotFoundError(project_id)
        return row

    def _execute(self, project_id: str, command: CreateProject | UpdateProject | ArchiveProject) -> Project:
        self.actors.ask(project_id, Execute(command, {"actor": command.user_id}))
        return self._visible(project_id, command.user_id, command.agent_id)

    def passivate(self, idle_since: datetime | None = None) -> int:
        """Stop the idle actors (unused since `idle_since`, if given); return how many."""
        return self.actors.passivate(idle_since)

    def close(self) -> None:
        self.actors.close()
