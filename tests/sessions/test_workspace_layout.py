"""Workspace layout helpers and setup (seed §3.5)."""

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors import (
    ActorsError,
    ProjectError,
    WorkspaceIdError,
    WorkspaceSetupError,
    agent_workspace_dir,
    group_agent_dir,
    group_home_dir,
    setup_agent_workspace,
    setup_group_workspace,
    setup_user_workspace,
    system_db_skills_dir,
    user_agent_dir,
    user_assets_dir,
    user_data_dir,
    user_home_dir,
    user_skills_dir,
)

BASE = "/srv/fl"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (agent_workspace_dir(BASE, "a1"), "/srv/fl/agents/a1"),
        (user_home_dir(BASE, "u1"), "/srv/fl/users/u1"),
        (group_home_dir(BASE, "g1"), "/srv/fl/users/group-g1"),
        (user_agent_dir(BASE, "u1", "a1"), "/srv/fl/users/u1/agents/a1"),
        (group_agent_dir(BASE, "g1", "a1"), "/srv/fl/users/group-g1/agents/a1"),
        (user_data_dir("/srv/fl/users/u1"), "/srv/fl/users/u1/data"),
        (user_assets_dir("/srv/fl/users/u1"), "/srv/fl/users/u1/data/assets"),
        (user_skills_dir("/srv/fl/users/u1"), "/srv/fl/users/u1/.agents/skills"),
        (system_db_skills_dir(BASE), "/srv/fl/.agents/db-skills"),
        # The home helpers compose with a group home as well as a user home.
        (user_data_dir(group_home_dir(BASE, "g1")), "/srv/fl/users/group-g1/data"),
    ],
)
def test_layout(path, expected):
    assert path == expected


def test_a_group_home_never_collides_with_a_user_home():
    assert group_home_dir(BASE, "x") != user_home_dir(BASE, "x")
    assert group_home_dir(BASE, "x") == user_home_dir(BASE, "group-x")  # the prefix is the whole difference


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # Joined as Go's filepath.Join: cleaned, empty elements skipped.
        (agent_workspace_dir("/srv/fl/", "a1"), "/srv/fl/agents/a1"),
        (agent_workspace_dir("/srv//fl/./x/..", "a1"), "/srv/fl/agents/a1"),
        (user_home_dir(Path("/srv/fl"), "u1"), "/srv/fl/users/u1"),
        (user_home_dir(BASE, ""), "/srv/fl/users"),
        (user_agent_dir(BASE, "u1", ""), "/srv/fl/users/u1/agents"),
        (agent_workspace_dir("", "a1"), "agents/a1"),
        (agent_workspace_dir("rel", "a1"), "rel/agents/a1"),
    ],
)
def test_paths_are_joined_and_cleaned(path, expected):
    assert path == expected


UNSAFE = ["..", ".", "../x", "a/b", "/abs", "x/..", "a\0b"]


@pytest.mark.parametrize("bad", UNSAFE)
@pytest.mark.parametrize(
    ("helper", "kind"),
    [
        (lambda v: agent_workspace_dir(BASE, v), "agent"),
        (lambda v: user_home_dir(BASE, v), "user"),
        (lambda v: group_home_dir(BASE, v), "group"),
        (lambda v: user_agent_dir(BASE, v, "a1"), "user"),
        (lambda v: user_agent_dir(BASE, "u1", v), "agent"),
        (lambda v: group_agent_dir(BASE, v, "a1"), "group"),
        (lambda v: group_agent_dir(BASE, "g1", v), "agent"),
    ],
)
def test_an_id_must_be_one_path_component(helper, kind, bad):
    with pytest.raises(WorkspaceIdError, match=f"^{kind} ID must be a single path component$"):
        helper(bad)


safe_ids = st.text(min_size=1, max_size=20).filter(
    lambda s: "/" not in s and "\0" not in s and s not in (".", "..")
)


@given(safe_ids, safe_ids)
def test_any_safe_id_stays_one_level_inside_its_parent(user, agent):
    home = user_home_dir(BASE, user)
    assert os.path.dirname(home) == "/srv/fl/users"
    assert os.path.basename(home) == user
    assert os.path.dirname(user_agent_dir(BASE, user, agent)) == home + "/agents"
    assert os.path.basename(group_home_dir(BASE, user)) == "group-" + user


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_setup_agent_workspace(tmp_path):
    assert setup_agent_workspace(tmp_path, "a1") == str(tmp_path / "agents" / "a1")
    assert tree(tmp_path) == {"agents", "agents/a1", "agents/a1/.agents", "agents/a1/.agents/skills"}
    assert setup_agent_workspace(str(tmp_path), "a1") == str(tmp_path / "agents" / "a1"), "idempotent"


HOME_TREE = {
    "data",
    "data/.cache",
    "data/.agents",
    "data/.agents/skills",
    "data/.agents/delegates",
    "data/assets",
    "agents",
    "agents/a1",
}


def test_setup_user_workspace(tmp_path):
    home = setup_user_workspace(tmp_path, "u1", "a1")
    assert home == user_home_dir(tmp_path, "u1") == str(tmp_path / "users" / "u1")
    assert tree(Path(home)) == HOME_TREE
    assert tree(tmp_path) == {"users", "users/u1"} | {f"users/u1/{p}" for p in HOME_TREE}
    assert setup_user_workspace(tmp_path, "u1", "a1") == home, "idempotent"


def test_setup_group_workspace(tmp_path):
    home = setup_group_workspace(tmp_path, "g1", "a1")
    assert home == group_home_dir(tmp_path, "g1") == str(tmp_path / "users" / "group-g1")
    assert tree(Path(home)) == HOME_TREE


def test_a_second_agent_shares_the_home(tmp_path):
    setup_user_workspace(tmp_path, "u1", "a1")
    setup_user_workspace(tmp_path, "u1", "a2")
    assert tree(tmp_path / "users" / "u1") == HOME_TREE | {"agents/a2"}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda b: setup_agent_workspace(b, ""), "agent ID must not be empty"),
        (lambda b: setup_user_workspace(b, "", "a1"), "user ID must not be empty"),
        (lambda b: setup_user_workspace(b, "u1", ""), "agent ID must not be empty"),
        (lambda b: setup_user_workspace(b, "", ""), "user ID must not be empty"),
        (lambda b: setup_group_workspace(b, "", "a1"), "group ID must not be empty"),
        (lambda b: setup_group_workspace(b, "g1", ""), "agent ID must not be empty"),
        (lambda b: setup_group_workspace(b, "", ""), "group ID must not be empty"),
        (lambda b: setup_agent_workspace(b, ".."), "agent ID must be a single path component"),
        (lambda b: setup_user_workspace(b, "../../escape", "a1"), "user ID must be a single path component"),
        (
            lambda b: setup_group_workspace(b, "g1", "../../../escape"),
            "agent ID must be a single path component",
        ),
    ],
)
def test_setup_refuses_bad_ids_and_creates_nothing(tmp_path, call, message):
    base = tmp_path / "base"
    base.mkdir()
    with pytest.raises(WorkspaceIdError) as caught:
        call(base)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, ProjectError)
    assert tree(tmp_path) == {"base"}, "nothing created, inside or outside the base"


def test_a_failing_mkdir_is_a_workspace_setup_error(tmp_path):
    (tmp_path / "users").write_text("a file where the users tree should be")
    with pytest.raises(WorkspaceSetupError) as caught:
        setup_user_workspace(tmp_path, "u1", "a1")
    assert str(caught.value).startswith("failed to resolve workspace: create ")
    assert isinstance(caught.value.__cause__, OSError)
    assert isinstance(caught.value, ActorsError)


def test_a_file_in_place_of_the_agent_dir_fails_setup(tmp_path):
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "a1").write_text("")
    with pytest.raises(WorkspaceSetupError):
        setup_agent_workspace(tmp_path, "a1")
