"""The tool-override store (seed §3.3 on persisted rows): scopes, owners, precedence, restarts."""

from __future__ import annotations

import pytest

from actors import (
    CORE_TOOLS,
    InvalidToolOverrideScopeError,
    ToolOverride,
    ToolOverrideDecision,
    filter_tool_enabled,
)


def override_events(system) -> list[str]:
    return [r.type for r in system.log.read_all() if r.category == "tooloverrides"]


def test_set_stores_one_row_per_tool_scope_and_owner(system):
    system.tool_overrides.set("web", "user_agent", False, user_id="alice", agent_id="main")
    system.tool_overrides.set("web", "user_agent", True, user_id="alice", agent_id="main")  # upsert
    system.tool_overrides.set("web", "user_agent", True, user_id="alice", agent_id="main")  # same: no event
    assert system.tool_overrides.fetch("alice", "main") == [
        ToolOverride("web", "user_agent", True, "alice", "main")
    ]
    assert override_events(system) == ["ToolOverrideSet", "ToolOverrideSet"]


def test_ids_a_scope_is_not_keyed_by_are_dropped(system):
    stored = system.tool_overrides.set("web", "system", False, user_id="alice", agent_id="main")
    assert stored == ToolOverride("web", "system", False)
    stored = system.tool_overrides.set("web", "user", True, user_id="alice", agent_id="main")
    assert stored == ToolOverride("web", "user", True, "alice", "")
    assert system.tool_overrides.fetch("bob", "other") == [ToolOverride("web", "system", False)]


def test_fetch_returns_exactly_the_rows_that_govern_the_pair(system):
    t = system.tool_overrides
    t.set("a", "system", True)
    t.set("b", "system_agent", False, agent_id="main")
    t.set("c", "system_agent", False, agent_id="other")
    t.set("d", "user", True, user_id="alice")
    t.set("e", "user", True, user_id="bob")
    t.set("f", "user_agent", False, user_id="alice", agent_id="main")
    t.set("g", "user_agent", False, user_id="alice", agent_id="other")
    t.set("h", "user_agent", False, user_id="bob", agent_id="main")
    assert [(r.tool_name, r.scope) for r in t.fetch("alice", "main")] == [
        ("a", "system"),
        ("b", "system_agent"),
        ("d", "user"),
        ("f", "user_agent"),
    ]
    assert all(row.applies_to("alice", "main") for row in t.fetch("alice", "main"))


@pytest.mark.parametrize("scope", ["", "global", "SYSTEM", "agent"])
def test_an_unknown_scope_is_refused_and_nothing_recorded(system, scope):
    with pytest.raises(InvalidToolOverrideScopeError):
        system.tool_overrides.set("web", scope, True, user_id="alice")
    with pytest.raises(InvalidToolOverrideScopeError):
        system.tool_overrides.clear("web", scope, user_id="alice")
    assert override_events(system) == []


def test_clear_removes_a_row_and_the_next_scope_decides_again(system):
    t = system.tool_overrides
    t.set("web", "system", True)
    t.set("web", "user", False, user_id="alice")
    assert t.resolve("alice", "main", "web", default_enabled=False) == ToolOverrideDecision(False, "user")
    t.clear("web", "user", user_id="alice")
    t.clear("web", "user", user_id="alice")  # nothing left to clear: no event
    assert t.resolve("alice", "main", "web", default_enabled=False) == ToolOverrideDecision(True, "system")
    t.clear("web", "system")
    assert t.resolve("alice", "main", "web", default_enabled=False) == ToolOverrideDecision(False, "default")
    set_, cleared = "ToolOverrideSet", "ToolOverrideCleared"
    assert override_events(system) == [set_, set_, cleared, cleared]


def test_stored_rows_follow_the_v0_60_0_precedence(system):
    t = system.tool_overrides
    # System agent beats system (v0.60.0): the agent row is the admin row.
    t.set("web", "system", False)
    t.set("web", "system_agent", True, agent_id="main")
    assert t.resolve("alice", "main", "web", False) == ToolOverrideDecision(True, "system_agent")
    assert t.resolve("alice", "other", "web", True) == ToolOverrideDecision(False, "system")
    # An admin disable beats any user enable.
    t.set("mail", "system_agent", False, agent_id="main")
    t.set("mail", "user_agent", True, user_id="alice", agent_id="main")
    assert t.resolve("alice", "main", "mail", True) == ToolOverrideDecision(False, "system_agent")
    # A user may disable an admin-enabled tool; user_agent beats user.
    t.set("web", "user", True, user_id="alice")
    t.set("web", "user_agent", False, user_id="alice", agent_id="main")
    assert t.resolve("alice", "main", "web", True) == ToolOverrideDecision(False, "user_agent")
    assert not t.enabled("alice", "main", "web", True)
    assert t.enabled("alice", "main", "search", True)


@pytest.mark.parametrize("tool", CORE_TOOLS)
def test_core_tools_are_exempt_from_every_stored_row(system, tool):
    for scope in ("system", "system_agent", "user", "user_agent"):
        system.tool_overrides.set(tool, scope, False, user_id="alice", agent_id="main")
    assert system.tool_overrides.resolve("alice", "main", tool, False) == ToolOverrideDecision(
        True, "default"
    )
    assert filter_tool_enabled(False, tool, system.tool_overrides.fetch("alice", "main"))


def test_overrides_survive_closing_and_reopening_the_system(open_system):
    first = open_system()
    first.tool_overrides.set("web", "system", False)
    first.tool_overrides.set("web", "user_agent", True, user_id="alice", agent_id="main")
    first.tool_overrides.set("mail", "user", False, user_id="alice")
    first.tool_overrides.clear("mail", "user", user_id="alice")
    rows = first.tool_overrides.fetch("alice", "main")
    first.close()

    second = open_system()
    assert second.tool_overrides.fetch("alice", "main") == rows
    # The admin's disable still beats the user's enable after the restart.
    assert second.tool_overrides.resolve("alice", "main", "web", True) == ToolOverrideDecision(
        False, "system"
    )


def test_a_row_changed_by_another_system_is_seen_here(open_system):
    here, there = open_system(), open_system()
    here.tool_overrides.set("web", "system", True)  # this process now caches the system owner
    there.tool_overrides.set("web", "system", False)
    assert here.tool_overrides.fetch("alice", "main") == [ToolOverride("web", "system", False)]
    # Setting it back from here decides on the latest rows: a stale cache would record nothing.
    here.tool_overrides.set("web", "system", True)
    assert there.tool_overrides.resolve("alice", "main", "web", False) == ToolOverrideDecision(True, "system")
