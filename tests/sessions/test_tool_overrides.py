"""Tool override precedence, v0.60.0 semantics (seed §3.3)."""

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors import (
    CORE_TOOLS,
    TOOL_OVERRIDE_ORIGIN_DEFAULT,
    TOOL_OVERRIDE_SCOPES,
    ActorsError,
    InvalidToolOverrideScopeError,
    ToolOverride,
    ToolOverrideDecision,
    ToolOverrideKey,
    ToolOverrideResolution,
    ToolOverrideRow,
    filter_tool_enabled,
    is_core_tool_name,
    resolve_tool_override,
    validate_scope,
)

SYS, SYS_AGENT, USER, USER_AGENT = "system", "system_agent", "user", "user_agent"
DEFAULT = "default"


def row(scope: str, enabled: bool, tool: str = "x") -> ToolOverride:
    return ToolOverride(tool_name=tool, scope=scope, enabled=enabled)


def rows_of(*specs: tuple[Any, ...]) -> list[ToolOverride]:
    """(scope, enabled) pairs, or (scope, enabled, tool) triples, as rows; the tool defaults to "x"."""
    return [row(spec[0], bool(spec[1]), *spec[2:]) for spec in specs]


S, SA, U, UA = SYS, SYS_AGENT, USER, USER_AGENT
case = pytest.param

# For the tool "x": default_enabled, rows (scope, enabled), expected enabled, expected origin.
CASES = [
    case(True, [], True, DEFAULT, id="default on"),
    case(False, [], False, DEFAULT, id="default off"),
    case(False, [(S, 1)], True, S, id="system enables"),
    case(True, [(S, 0)], False, S, id="system disables"),
    case(False, [(SA, 1)], True, SA, id="system agent enables"),
    case(True, [(SA, 0)], False, SA, id="system agent disables"),
    # v0.60.0: the more specific admin row is the admin row, even when it enables what
    # `system` disables. (A later release caps it with origin `system`; we keep v0.60.0.)
    case(False, [(S, 0), (SA, 1)], True, SA, id="system agent beats system"),
    case(False, [(SA, 1), (S, 0)], True, SA, id="system agent beats system, listed first"),
    case(True, [(S, 1), (SA, 0)], False, SA, id="system agent disable beats system enable"),
    case(True, [(S, 1), (U, 0)], False, U, id="user disables after admin enable"),
    case(True, [(SA, 1), (UA, 0)], False, UA, id="user agent disables after admin enable"),
    case(False, [(U, 0), (UA, 1)], True, UA, id="user agent beats user"),
    case(True, [(UA, 0), (U, 1)], False, UA, id="user agent disable beats user enable"),
    case(True, [(SA, 0), (UA, 1)], False, SA, id="admin disable beats user enable"),
    case(True, [(S, 0), (U, 1)], False, S, id="system disable beats user enable"),
    case(True, [(UA, 1), (S, 0)], False, S, id="system disable beats user agent enable"),
    case(False, [(U, 1)], True, U, id="user enables when admin silent"),
    case(True, [(U, 0)], False, U, id="user disables when admin silent"),
    case(False, [(S, 1), (U, 1)], True, U, id="a user enable takes the origin from an admin enable"),
    case(False, [(S, 1), (SA, 1)], True, SA, id="an admin enable decides when the user is silent"),
    case(True, [(S, 1), (SA, 0), (UA, 1)], False, SA, id="system agent disable beats both enables"),
    case(True, [(S, 0), (SA, 1), (U, 0)], False, U, id="system agent lifts system, then the user decides"),
    case(True, [(UA, 0, "y")], True, DEFAULT, id="other tool ignored"),
    case(True, [(U, 0, "X"), (U, 0, "x ")], True, DEFAULT, id="tool names match exactly"),
    case(False, [(U, 1), (U, 0)], True, U, id="first row in a scope wins (enable first)"),
    case(True, [(U, 0), (U, 1)], False, U, id="first row in a scope wins (disable first)"),
    case(True, [(S, 1), (S, 0)], True, S, id="first admin row wins"),
    case(True, [("global", 0), ("System", 0)], True, DEFAULT, id="unknown scopes ignored"),
    case(False, [("admin", 0), (U, 1)], True, U, id="an unknown scope does not hide a real one"),
]


@pytest.mark.parametrize(("default_enabled", "specs", "enabled", "origin"), CASES)
def test_precedence(default_enabled, specs, enabled, origin):
    rows = rows_of(*specs)
    assert resolve_tool_override(default_enabled, "x", rows) == ToolOverrideDecision(enabled, origin)
    assert filter_tool_enabled(default_enabled, "x", rows) is enabled


@pytest.mark.parametrize("tool", CORE_TOOLS)
@pytest.mark.parametrize("default_enabled", [True, False])
def test_core_tools_are_always_enabled(tool, default_enabled):
    rows = [row(scope, False, tool=tool) for scope in TOOL_OVERRIDE_SCOPES]
    assert resolve_tool_override(default_enabled, tool, rows) == ToolOverrideDecision(True, DEFAULT)
    assert filter_tool_enabled(default_enabled, tool, rows) is True


def test_core_tools_are_the_sandbox_set():
    assert CORE_TOOLS == ("bash", "read", "write", "edit")
    assert all(is_core_tool_name(name) for name in CORE_TOOLS)
    assert not any(is_core_tool_name(name) for name in ["Bash", "bash ", "grep", "", "read_file"])


def test_a_core_lookalike_obeys_its_rows():
    decision = resolve_tool_override(True, "Bash", [row(SYS, False, tool="Bash")])
    assert decision == ToolOverrideDecision(False, SYS)


def test_rows_may_be_any_iterable_and_are_read_once():
    rows = iter([row(SYS, True), row(USER, False)])
    assert resolve_tool_override(True, "x", rows) == ToolOverrideDecision(False, USER)


scopes = st.sampled_from([*TOOL_OVERRIDE_SCOPES, "other"])
rows_strategy = st.lists(
    st.builds(ToolOverride, tool_name=st.sampled_from(["x", "y"]), scope=scopes, enabled=st.booleans()),
    max_size=8,
)


@given(st.booleans(), rows_strategy)
def test_filter_is_the_enabled_bit_of_resolve(default_enabled, rows):
    decision = resolve_tool_override(default_enabled, "x", rows)
    assert filter_tool_enabled(default_enabled, "x", rows) is decision.enabled
    assert decision.origin in (*TOOL_OVERRIDE_SCOPES, DEFAULT)


@given(st.booleans(), rows_strategy, st.randoms(use_true_random=False))
def test_only_the_order_within_a_scope_matters(default_enabled, rows, random):
    # Shuffle across scopes while keeping each scope's rows in their order.
    by_scope: dict[str, list[ToolOverride]] = {}
    for r in rows:
        by_scope.setdefault(r.scope, []).append(r)
    queues = [list(q) for q in by_scope.values()]
    shuffled = []
    while queues:
        queue = random.choice(queues)
        shuffled.append(queue.pop(0))
        if not queue:
            queues.remove(queue)
    expected = resolve_tool_override(default_enabled, "x", rows)
    assert resolve_tool_override(default_enabled, "x", shuffled) == expected


@given(st.booleans(), rows_strategy, st.sampled_from([SYS, SYS_AGENT]))
def test_a_disabling_admin_row_alone_always_disables(default_enabled, rows, scope):
    rows = [r for r in rows if r.scope not in (SYS, SYS_AGENT)] + [row(scope, False)]
    assert resolve_tool_override(default_enabled, "x", rows) == ToolOverrideDecision(False, scope)


@pytest.mark.parametrize("scope", TOOL_OVERRIDE_SCOPES)
def test_validate_scope_accepts_the_vocabulary(scope):
    assert validate_scope(scope) == scope


def test_the_vocabulary_is_the_seeds():
    assert TOOL_OVERRIDE_SCOPES == ("system", "system_agent", "user", "user_agent")
    assert TOOL_OVERRIDE_ORIGIN_DEFAULT == "default"


@pytest.mark.parametrize("scope", ["", "default", "System", "system ", "admin", "user-agent", "global"])
def test_validate_scope_refuses_anything_else(scope):
    with pytest.raises(InvalidToolOverrideScopeError) as caught:
        validate_scope(scope)
    assert str(caught.value) == f'tool override: invalid scope "{scope}"'
    assert caught.value.scope == scope
    assert isinstance(caught.value, ActorsError)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        (SYS, ToolOverrideKey("t", SYS)),
        (SYS_AGENT, ToolOverrideKey("t", SYS_AGENT, agent_id="a1")),
        (USER, ToolOverrideKey("t", USER, user_id="u1")),
        (USER_AGENT, ToolOverrideKey("t", USER_AGENT, user_id="u1", agent_id="a1")),
    ],
)
def test_a_key_keeps_only_the_ids_its_scope_is_keyed_by(scope, expected):
    assert ToolOverrideKey.for_scope("t", scope, user_id="u1", agent_id="a1") == expected


def test_a_key_refuses_an_unknown_scope():
    with pytest.raises(InvalidToolOverrideScopeError):
        ToolOverrideKey.for_scope("t", "everyone")


def test_a_row_knows_its_key():
    r = ToolOverride("t", USER_AGENT, False, user_id="u1", agent_id="a1")
    assert r.key == ToolOverrideKey("t", USER_AGENT, "u1", "a1")


@pytest.mark.parametrize(
    ("r", "applies"),
    [
        (ToolOverride("t", SYS, True), True),
        (ToolOverride("t", SYS_AGENT, True, agent_id="a1"), True),
        (ToolOverride("t", SYS_AGENT, True, agent_id="a2"), False),
        (ToolOverride("t", USER, True, user_id="u1"), True),
        (ToolOverride("t", USER, True, user_id="u2"), False),
        (ToolOverride("t", USER_AGENT, True, user_id="u1", agent_id="a1"), True),
        (ToolOverride("t", USER_AGENT, True, user_id="u1", agent_id="a2"), False),
        (ToolOverride("t", USER_AGENT, True, user_id="u2", agent_id="a1"), False),
        (ToolOverride("t", "other", True), False),
    ],
)
def test_which_rows_apply_to_a_user_and_agent(r, applies):
    assert r.applies_to("u1", "a1") is applies


def test_values_are_frozen_and_the_flightlog_names_are_the_same_classes():
    assert ToolOverrideRow is ToolOverride
    assert ToolOverrideResolution is ToolOverrideDecision
    with pytest.raises(dataclasses.FrozenInstanceError):
        row(SYS, True).enabled = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ToolOverrideDecision(True, SYS).origin = USER  # type: ignore[misc]
