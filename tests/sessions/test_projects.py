"""Projects (seed §3.4): containment, ownership, the route-agent binding, ensure, and restarts."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from actors import (
    InvalidBaseDirError,
    ProjectNotFoundError,
    System,
    WorkspaceSetupError,
    default_project_id,
    user_agent_dir,
)


def root(workspace, user="alice", agent="main") -> str:
    return user_agent_dir(str(workspace), user, agent)


def project_events(system) -> list[str]:
    return [r.type for r in system.log.read_all() if r.category == "project"]


def test_create_keeps_the_project_inside_the_agent_workspace(system, workspace):
    made = system.projects.create("alice", "main", "site", f"{root(workspace)}/web/../site", "the site")
    assert (made.name, made.base_dir, made.description) == ("site", f"{root(workspace)}/site", "the site")
    assert (made.user_id, made.agent_id, made.archived) == ("alice", "main", False)
    assert os.path.isdir(made.base_dir)
    assert system.projects.create("alice", "main", "all", root(workspace)).base_dir == root(workspace)


@pytest.mark.parametrize(
    ("base_dir", "reason"),
    [
        ("", "base_dir must not be empty"),
        ("relative/dir", "base_dir must be absolute"),
        ("{root}/../../bob/agents/main", "base_dir must be under user workspace"),
        ("{root}/../other-agent", "base_dir must be under user workspace"),
    ],
)
def test_create_refuses_a_base_dir_outside_the_workspace(system, workspace, base_dir, reason):
    with pytest.raises(InvalidBaseDirError) as caught:
        system.projects.create("alice", "main", "x", base_dir.format(root=root(workspace)))
    assert str(caught.value) == reason
    assert caught.value.sentinel == "invalid base_dir"
    assert project_events(system) == []


def test_a_workspace_that_cannot_be_set_up_is_a_setup_error(log, clock, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with (
        System.open(log, clock=clock, scheduler=False, workspace=blocker) as system,
        pytest.raises(WorkspaceSetupError, match="failed to resolve workspace"),
    ):
        system.projects.create("alice", "main", "x", str(blocker / "x"))
    with System.open(log, clock=clock, scheduler=False) as system, pytest.raises(WorkspaceSetupError):
        system.projects.ensure("main", "alice")


def test_a_foreign_or_misrouted_project_is_not_found(system, workspace):
    made = system.projects.create("alice", "main", "site", f"{root(workspace)}/site")
    for user, agent, project_id in [
        ("bob", "main", made.id),
        ("alice", "other", made.id),
        ("alice", "main", "nope"),
    ]:
        with pytest.raises(ProjectNotFoundError, match=r"^project not found$"):
            system.projects.get(user, agent, project_id)
        with pytest.raises(ProjectNotFoundError):
            system.projects.update(user, agent, project_id, name="mine now")
        with pytest.raises(ProjectNotFoundError):
            system.projects.archive(user, agent, project_id)
        with pytest.raises(ProjectNotFoundError):
            system.projects.delete(user, agent, project_id)
    # A stranger's bad base_dir is still "not found": the answer never depends on the project.
    with pytest.raises(ProjectNotFoundError):
        system.projects.update("bob", "main", made.id, base_dir="relative")
    assert system.projects.get("alice", "main", made.id) == made


def test_list_shows_the_callers_projects_of_the_route_agent(system, workspace):
    a = system.projects.create("alice", "main", "a", f"{root(workspace)}/a")
    b = system.projects.create("alice", "main", "b", f"{root(workspace)}/b")
    system.projects.create("bob", "main", "c", f"{root(workspace, 'bob')}/c")
    system.projects.create("alice", "other", "d", f"{root(workspace, agent='other')}/d")
    archived = system.projects.archive("alice", "main", b.id)
    assert archived.archived
    assert system.projects.list("alice", "main") == [a]
    assert system.projects.list("alice", "main", include_archived=True) == [a, archived]


def test_update_merges_and_checks_a_new_base_dir(system, workspace):
    made = system.projects.create("alice", "main", "site", f"{root(workspace)}/site", "old")
    moved = system.projects.update("alice", "main", made.id, base_dir=f"{root(workspace)}/moved")
    assert (moved.name, moved.base_dir, moved.description) == ("site", f"{root(workspace)}/moved", "old")
    with pytest.raises(InvalidBaseDirError, match="base_dir must be under user workspace"):
        system.projects.update("alice", "main", made.id, base_dir="/etc")
    assert system.projects.get("alice", "main", made.id) == moved
    system.projects.update("alice", "main", made.id, name="site")  # no change: nothing recorded
    assert project_events(system) == ["ProjectCreated", "ProjectUpdated"]


def test_delete_forgets_the_project_but_not_its_history(system, workspace):
    made = system.projects.create("alice", "main", "site", f"{root(workspace)}/site")
    before = system.log.head().seq
    system.projects.delete("alice", "main", made.id)
    with pytest.raises(ProjectNotFoundError):
        system.projects.get("alice", "main", made.id)
    assert system.projects.list("alice", "main") == []
    assert [p.id for p in system.views.projects(at=before)] == [made.id]
    assert project_events(system) == ["ProjectCreated", "ProjectDeleted"]


def test_a_denied_agent_access_stops_every_use_case_unchanged(system, workspace):
    made = system.projects.create("alice", "main", "site", f"{root(workspace)}/site")
    denial = PermissionError("agent access denied")
    asked = []

    def deny(user_id, agent_id):
        asked.append((user_id, agent_id))
        raise denial

    system.projects.authorize = deny
    head = system.log.head().seq
    calls = [
        lambda: system.projects.create("bob", "main", "x", "relative"),  # not even validated
        lambda: system.projects.get("alice", "main", made.id),
        lambda: system.projects.list("alice", "main"),
        lambda: system.projects.update("alice", "main", made.id, name="y"),
        lambda: system.projects.archive("alice", "main", made.id),
        lambda: system.projects.delete("alice", "main", made.id),
    ]
    for call in calls:
        with pytest.raises(PermissionError) as caught:
            call()
        assert caught.value is denial
    assert len(asked) == len(calls)
    assert system.log.head().seq == head
    assert not os.path.exists(user_agent_dir(str(workspace), "bob", "main"))
    # The runtime paths authorize nothing.
    assert system.projects.resolve(made.id, "alice") == made.base_dir


def test_ensure_returns_one_default_project_per_agent_and_user(system, workspace):
    first = system.projects.ensure("main", "alice")
    assert first == default_project_id("main", "alice")
    assert system.projects.ensure("main", "alice") == first
    assert system.projects.ensure("main", "bob") != first
    assert system.projects.ensure("other", "alice") != first
    default = system.projects.get("alice", "main", first)
    assert (default.name, default.base_dir, default.is_default) == ("default", root(workspace), True)
    assert os.path.isdir(os.path.join(str(workspace), "users", "alice", "data", "assets"))
    assert project_events(system).count("ProjectCreated") == 3


def test_concurrent_ensures_create_one_project(open_system):
    systems = [open_system(), open_system()]
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda i: systems[i % 2].projects.ensure("main", "alice"), range(16)))
    assert len(set(ids)) == 1
    assert project_events(systems[0]) == ["ProjectCreated"]


def test_ensure_recreates_a_deleted_default_project(system):
    pid = system.projects.ensure("main", "alice")
    system.projects.delete("alice", "main", pid)
    assert system.projects.ensure("main", "alice") == pid
    assert system.projects.get("alice", "main", pid).is_default


def test_resolve_gives_the_owners_base_dir_only(system, workspace):
    made = system.projects.create("alice", "main", "site", f"{root(workspace)}/site")
    assert system.projects.resolve(made.id, "alice") == made.base_dir
    with pytest.raises(ProjectNotFoundError):
        system.projects.resolve(made.id, "bob")
    with pytest.raises(ProjectNotFoundError):
        system.projects.resolve("nope", "alice")


def test_projects_survive_closing_and_reopening_the_system(open_system, workspace):
    first = open_system()
    made = first.projects.create("alice", "main", "site", f"{root(workspace)}/site", "d")
    updated = first.projects.update("alice", "main", made.id, name="renamed")
    gone = first.projects.create("alice", "main", "tmp", f"{root(workspace)}/tmp")
    first.projects.delete("alice", "main", gone.id)
    default = first.projects.ensure("main", "alice")
    assert default == made.id  # the pair's first project, not a new default one
    listed = first.projects.list("alice", "main")
    first.close()

    second = open_system()
    assert second.projects.list("alice", "main") == listed
    assert second.projects.get("alice", "main", made.id) == updated
    assert second.projects.ensure("main", "alice") == default
    with pytest.raises(ProjectNotFoundError):
        second.projects.get("alice", "main", gone.id)
    assert project_events(second).count("ProjectCreated") == 2


def test_changes_by_another_system_are_decided_on_here(open_system, workspace):
    here, there = open_system(), open_system()
    made = here.projects.create("alice", "main", "site", f"{root(workspace)}/site")
    there.projects.update("alice", "main", made.id, name="renamed")
    # This process still caches "site": renaming back must not pass for "no change".
    assert here.projects.update("alice", "main", made.id, name="site").name == "site"
    assert here.projects.ensure("main", "alice") == made.id
    there.projects.delete("alice", "main", made.id)
    # The pair has no project left once here has heard of the delete: ensure makes the default one.
    here.views.catch_up()
    pid = here.projects.ensure("main", "alice")
    assert pid == default_project_id("main", "alice")
    assert there.projects.get("alice", "main", pid).is_default


def test_ensure_returns_the_pairs_existing_project_the_first_one_listed(system, workspace):
    # Given the pair already has two projects, neither of them the default one,
    first = system.projects.create("alice", "main", "site", f"{root(workspace)}/site")
    system.projects.create("alice", "main", "docs", f"{root(workspace)}/docs")
    before = project_events(system)
    # when the runtime ensures the pair's project,
    ensured = system.projects.ensure("main", "alice")
    # then it is the first one listed, and nothing is created.
    assert ensured == first.id == system.projects.list("alice", "main")[0].id
    assert project_events(system) == before
    # Another pair with none gets one created.
    assert system.projects.ensure("main", "bob") == default_project_id("main", "bob")
