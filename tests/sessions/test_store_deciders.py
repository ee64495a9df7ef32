"""The project and tool-override deciders, given/when/then (pure: no log, no clock)."""

from __future__ import annotations

import pytest

from actors import (
    InvalidToolOverrideScopeError,
    ProjectError,
    ProjectNotFoundError,
    ToolOverride,
    ToolOverrideKey,
)
from actors.sessions.project_decider import (
    ArchiveProject,
    CreateProject,
    DeleteProject,
    ProjectState,
    UpdateProject,
)
from actors.sessions.project_decider import decide as decide_project
from actors.sessions.project_decider import evolve as evolve_project
from actors.sessions.tool_override_decider import (
    ClearToolOverride,
    SetToolOverride,
    ToolOverridesState,
    owner_of,
    owners_for,
)
from actors.sessions.tool_override_decider import decide as decide_override
from actors.sessions.tool_override_decider import evolve as evolve_override
from eventlog.events import (
    ProjectArchived,
    ProjectCreated,
    ProjectDeleted,
    ProjectUpdated,
    ToolOverrideCleared,
    ToolOverrideSet,
)

from .gwt import T0, Scenario

PID = "p-1"
project = Scenario(decide_project, evolve_project, ProjectState, id=PID)
overrides = Scenario(decide_override, evolve_override, ToolOverridesState, id="user_agent/alice/main")

CREATED = ProjectCreated(PID, "main", "alice", "site", "/ws/users/alice/agents/main/site", "", False, T0)


# -- projects --------------------------------------------------------------------------------


def test_a_project_is_created_once():
    command = CreateProject("alice", "main", "site", "/ws/users/alice/agents/main/site")
    then = project.given().when(command)
    then.then([CREATED])
    assert then.after.visible_to("alice", "main")
    project.given([CREATED]).when(command).then(ProjectError)


def test_a_default_project_is_ensured_idempotently_and_again_after_deletion():
    command = CreateProject("alice", "main", "default", "/ws/users/alice/agents/main", is_default=True)
    default = ProjectCreated(PID, "main", "alice", "default", "/ws/users/alice/agents/main", "", True, T0)
    project.given().when(command).then([default])
    project.given([default]).when(command).then([])
    project.given([default, ProjectDeleted(PID, T0)]).when(command).then([default])


@pytest.mark.parametrize(
    "command",
    [
        UpdateProject("alice", "main", name="x"),
        ArchiveProject("alice", "main"),
        DeleteProject("alice", "main"),
    ],
)
def test_missing_foreign_and_other_agent_projects_are_one_opaque_not_found(command):
    for events, user, agent in [
        ([], "alice", "main"),  # missing
        ([CREATED], "bob", "main"),  # another user's
        ([CREATED], "alice", "other"),  # bound to another route agent
        ([CREATED, ProjectDeleted(PID, T0)], "alice", "main"),  # deleted
    ]:
        asked = type(command)(**{**_fields(command), "user_id": user, "agent_id": agent})
        error = project.given(events).when(asked).then(ProjectNotFoundError)
        assert str(error) == "project not found"


def _fields(command):
    return {name: getattr(command, name) for name in command.__dataclass_fields__}


def test_an_update_merges_only_the_given_fields():
    then = project.given([CREATED]).when(UpdateProject("alice", "main", description="docs"))
    then.then([ProjectUpdated(PID, "site", "/ws/users/alice/agents/main/site", "docs", T0)])
    assert (then.after.name, then.after.description) == ("site", "docs")
    project.given([CREATED]).when(UpdateProject("alice", "main", name="site")).then([])


def test_archive_once_and_delete():
    project.given([CREATED]).when(ArchiveProject("alice", "main")).then([ProjectArchived(PID, T0)])
    project.given([CREATED, ProjectArchived(PID, T0)]).when(ArchiveProject("alice", "main")).then([])
    then = project.given([CREATED]).when(DeleteProject("alice", "main"))
    then.then([ProjectDeleted(PID, T0)])
    assert not then.after.live


# -- tool overrides --------------------------------------------------------------------------


def row(tool="web", enabled=True) -> ToolOverride:
    return ToolOverride(tool, "user_agent", enabled, "alice", "main")


def set_event(tool="web", enabled=True) -> ToolOverrideSet:
    return ToolOverrideSet(tool, "user_agent", "alice", "main", enabled, T0)


def test_setting_a_row_is_an_upsert():
    overrides.given().when(SetToolOverride(row())).then([set_event()])
    overrides.given([set_event()]).when(SetToolOverride(row())).then([])
    then = overrides.given([set_event(), set_event("mail")]).when(SetToolOverride(row(enabled=False)))
    then.then([set_event(enabled=False)])
    assert then.after.rows == (row(enabled=False), row("mail"))


def test_clearing_removes_the_row_if_there_is_one():
    key = ToolOverrideKey("web", "user_agent", "alice", "main")
    then = overrides.given([set_event()]).when(ClearToolOverride(key))
    then.then([ToolOverrideCleared("web", "user_agent", "alice", "main", T0)])
    assert then.after.rows == ()
    overrides.given().when(ClearToolOverride(key)).then([])


def test_an_unknown_scope_is_refused_before_anything_is_decided():
    bad = ToolOverride("web", "global", True)
    overrides.given().when(SetToolOverride(bad)).then(InvalidToolOverrideScopeError)
    overrides.given().when(ClearToolOverride(ToolOverrideKey("web", "admin"))).then(
        InvalidToolOverrideScopeError
    )


def test_each_owner_has_its_own_stream():
    assert owners_for("alice", "main") == [
        "system",
        "system_agent/main",
        "user/alice",
        "user_agent/alice/main",
    ]
    # Ids are percent-encoded, so no id can pose as another owner's path.
    assert owner_of(ToolOverrideKey("t", "user_agent", "a/b", "c")) == "user_agent/a%2Fb/c"
    assert owner_of(ToolOverrideKey("t", "user_agent", "a", "b/c")) == "user_agent/a/b%2Fc"
    long = owner_of(ToolOverrideKey("t", "user", "u" * 1000))
    assert long.startswith("user/sha256:")
    assert len(long) < 100
