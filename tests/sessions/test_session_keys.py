"""Session keys, kinds and channels, compaction defaults (seed §3.1, §3.2, §3.6)."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors import (
    DEFAULT_COMPACTION_KEEP_TAIL,
    DEFAULT_COMPACTION_MAX_TOKENS,
    DEFAULT_SESSION_KIND,
    SESSION_CHANNEL_DELEGATE,
    SESSION_CHANNEL_SCHEDULER,
    SESSION_CHANNEL_TASK,
    SESSION_CHANNEL_WEB,
    SESSION_CHANNELS,
    SESSION_KIND_CHAT,
    SESSION_KIND_DELEGATE,
    SESSION_KIND_MAIN,
    SESSION_KIND_SCHEDULER,
    SESSION_KIND_TASK,
    SESSION_KINDS,
    CompactionConfig,
    build_group_session_key,
    build_main_session_key,
    build_session_key,
    build_user_session_key,
    default_channel,
)

ids = st.text(max_size=12)


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (("a1", "telegram", "555", "dm"), "a1:telegram:555:dm"),
        (("a1", "slack", "U1", ""), "a1:slack:U1:"),
        (("", "", "", ""), ":::"),
        # No escaping: a colon inside a part is kept, so two different tuples can collide.
        (("a:b", "p", "u", "c"), "a:b:p:u:c"),
        (("a", "b:p", "u", "c"), "a:b:p:u:c"),
    ],
)
def test_session_key_is_a_plain_concatenation(args, key):
    assert build_session_key(*args) == key


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (("a1", "u1", "private"), "a1:user:u1:private"),
        (("a1", "u1", ""), "a1:user:u1:"),
        (("a 1", "ü/1", "c:x"), "a 1:user:ü/1:c:x"),
    ],
)
def test_user_session_key_omits_the_platform(args, key):
    assert build_user_session_key(*args) == key


@pytest.mark.parametrize(
    ("args", "key"),
    [(("a1", "g1"), "a1:group:g1"), (("a1", ""), "a1:group:"), (("", "g:1"), ":group:g:1")],
)
def test_group_session_key(args, key):
    assert build_group_session_key(*args) == key


def test_main_session_key_is_the_private_user_key():
    assert build_main_session_key("a1", "u1") == "a1:user:u1:private"


@given(ids, ids, ids, ids)
def test_keys_never_escape_or_normalise(agent, platform, user, ctx):
    assert build_session_key(agent, platform, user, ctx) == ":".join([agent, platform, user, ctx])
    assert build_user_session_key(agent, user, ctx) == ":".join([agent, "user", user, ctx])
    assert build_group_session_key(agent, user) == ":".join([agent, "group", user])


def test_kinds_and_channels_have_the_seed_values():
    assert SESSION_KINDS == ("main", "chat", "delegate", "task", "scheduler")
    assert SESSION_CHANNELS == ("web", "cli", "telegram", "delegate", "task", "scheduler", "webhook")
    assert DEFAULT_SESSION_KIND == SESSION_KIND_CHAT == "chat"


@pytest.mark.parametrize(
    ("kind", "channel"),
    [
        (SESSION_KIND_DELEGATE, SESSION_CHANNEL_DELEGATE),
        (SESSION_KIND_TASK, SESSION_CHANNEL_TASK),
        (SESSION_KIND_SCHEDULER, SESSION_CHANNEL_SCHEDULER),
        (SESSION_KIND_CHAT, SESSION_CHANNEL_WEB),
        (SESSION_KIND_MAIN, SESSION_CHANNEL_WEB),
        ("", SESSION_CHANNEL_WEB),
        ("Delegate", SESSION_CHANNEL_WEB),
        ("something-new", SESSION_CHANNEL_WEB),
    ],
)
def test_default_channel_by_kind(kind, channel):
    assert default_channel(kind) == channel


@pytest.mark.parametrize(
    ("given_", "expected"),
    [
        ((0, 0), (80_000, 6)),
        ((-1, 0), (-1, 6)),  # negative max_tokens: automatic compaction disabled, kept
        ((-50_000, 0), (-50_000, 6)),
        ((1, 0), (1, 6)),
        ((120_000, 0), (120_000, 6)),
        ((0, 1), (80_000, 1)),
        ((0, -3), (80_000, -3)),  # non-zero keep_tail is kept, even negative
        ((5, 2), (5, 2)),
    ],
)
def test_compaction_with_defaults(given_, expected):
    config = CompactionConfig(max_tokens=given_[0], keep_tail=given_[1])
    filled = config.with_defaults()
    assert (filled.max_tokens, filled.keep_tail) == expected
    assert (config.max_tokens, config.keep_tail) == given_, "with_defaults returns a copy"


def test_compaction_defaults_are_the_seed_numbers():
    assert (DEFAULT_COMPACTION_MAX_TOKENS, DEFAULT_COMPACTION_KEEP_TAIL) == (80_000, 6)
    assert CompactionConfig() == CompactionConfig(0, 0)
    assert CompactionConfig().with_defaults() == CompactionConfig(80_000, 6)


def test_compaction_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        CompactionConfig().max_tokens = 5  # type: ignore[misc]


@given(st.integers(), st.integers())
def test_with_defaults_changes_only_zeros_and_is_idempotent(max_tokens, keep_tail):
    filled = CompactionConfig(max_tokens, keep_tail).with_defaults()
    assert filled.max_tokens == (max_tokens or 80_000)
    assert filled.keep_tail == (keep_tail or 6)
    assert filled.with_defaults() == filled
