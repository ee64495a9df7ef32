"""The session decider, given/when/then: every registry rule of seed §3.6 and the turn rules."""

from __future__ import annotations

import pytest

from actors import (
    TURN_FAILED,
    TURN_INTERRUPTED,
    TURN_SUCCEEDED,
    GroupCompactionUnsupportedError,
    InvalidSessionRequestError,
    SessionArchivedError,
    SessionForbiddenError,
    SessionNotFoundError,
    SessionRequest,
    SessionWrongKindError,
)
from actors.sessions.decider import (
    Archive,
    Compact,
    Ensure,
    FinishTurn,
    RecordTurnEvent,
    SessionState,
    StartTurn,
    decide,
    evolve,
)
from eventlog.events import (
    SessionArchived,
    SessionCompacted,
    SessionCreated,
    TurnEventRecorded,
    TurnFinished,
    TurnStarted,
)

from .gwt import T0, Scenario

SID = "0198f1c2-0000-7000-8000-000000000001"
session = Scenario(decide, evolve, SessionState, id=SID)


def created(kind="chat", channel="web", user="alice", agent="main", group="", key="") -> SessionCreated:
    return SessionCreated(SID, key, kind, channel, user, agent, group, "", "", T0)


def ensure(**fields) -> Ensure:
    fields.setdefault("session_id", SID)
    fields.setdefault("user_id", "alice")
    fields.setdefault("agent_id", "main")
    return Ensure(SessionRequest(**fields))


def create(**fields) -> Ensure:
    return ensure(allow_exact_id_create=True, create_if_missing=True, **fields)


# -- a request needs its user and its agent -------------------------------------------------


def test_a_request_without_a_user_is_refused():
    error = session.given().when(create(user_id="")).then(InvalidSessionRequestError)
    assert str(error) == "UserID is required"


def test_a_request_without_an_agent_is_refused():
    error = session.given([created()]).when(ensure(agent_id="")).then(InvalidSessionRequestError)
    assert str(error) == "AgentID is required"


def test_a_group_request_is_owned_by_its_group_so_needs_no_user():
    session.given().when(create(user_id="", group_id="g1")).then(
        [SessionCreated(SID, "main:group:g1", "chat", "web", "g1", "main", "g1", "", "", T0)]
    )


# -- resume: the id exists --------------------------------------------------------------------


def test_the_owner_resumes_without_recording_anything():
    then = session.given([created()]).when(ensure())
    then.then([])
    assert then.after.info.user_id == "alice"


@pytest.mark.parametrize(("user", "agent"), [("bob", "main"), ("alice", "other")])
def test_another_owner_or_agent_is_forbidden(user, agent):
    error = session.given([created()]).when(ensure(user_id=user, agent_id=agent)).then(SessionForbiddenError)
    assert str(error) == "session access forbidden"


def test_an_archived_session_cannot_be_resumed():
    error = (
        session.given([created(), SessionArchived(SID, "alice", T0)])
        .when(ensure())
        .then(SessionArchivedError)
    )
    assert str(error) == "session is archived"


def test_ownership_is_checked_before_archival():
    # A stranger must not learn that the session is archived.
    session.given([created(), SessionArchived(SID, "alice", T0)]).when(ensure(user_id="bob")).then(
        SessionForbiddenError
    )


def test_a_required_kind_must_match_with_the_exact_message():
    error = (
        session.given([created(kind="task")])
        .when(ensure(require_kind="scheduler"))
        .then(SessionWrongKindError)
    )
    assert str(error) == 'session kind mismatch: got "task", want "scheduler"'
    assert (error.got, error.want, error.session_id) == ("task", "scheduler", SID)


def test_archival_is_checked_before_the_kind():
    given = session.given([created(kind="task"), SessionArchived(SID, "alice", T0)])
    given.when(ensure(require_kind="scheduler")).then(SessionArchivedError)


def test_a_matching_kind_resumes_and_no_required_kind_accepts_any():
    session.given([created(kind="task")]).when(ensure(require_kind="task")).then([])
    session.given([created(kind="task")]).when(ensure()).then([])


def test_resuming_never_creates_even_when_creation_is_allowed():
    session.given([created()]).when(create(kind="task")).then([])


def test_a_private_session_cannot_be_used_as_a_group_session():
    # The owner matches (a user id equal to the group id), but the durable group differs.
    given = session.given([created(user="team")])
    given.when(ensure(user_id="team", group_id="team")).then(SessionForbiddenError)


def test_a_group_session_is_resumed_by_its_group():
    given = session.given([created(user="g1", group="g1", key="main:group:g1")])
    given.when(ensure(user_id="alice", group_id="g1")).then([])
    given.when(ensure(user_id="g1")).then([])
    given.when(ensure(user_id="alice")).then(SessionForbiddenError)
    given.when(ensure(user_id="g2", group_id="g2")).then(SessionForbiddenError)


# -- creation: the id is missing ----------------------------------------------------------------


def test_an_exact_id_is_created_only_when_both_flags_allow_it():
    session.given().when(create()).then([created()])
    for flags in ({"allow_exact_id_create": True}, {"create_if_missing": True}, {}):
        error = session.given().when(ensure(**flags)).then(SessionNotFoundError)
        assert str(error) == f"session not found: {SID}"


@pytest.mark.parametrize(
    ("kind", "channel"),
    [
        ("", "web"),
        ("chat", "web"),
        ("main", "web"),
        ("delegate", "delegate"),
        ("task", "task"),
        ("scheduler", "scheduler"),
    ],
)
def test_the_kind_defaults_to_chat_and_the_channel_follows_the_kind(kind, channel):
    then = session.given().when(create(kind=kind))
    then.then([created(kind=kind or "chat", channel=channel)])
    assert (then.after.info.kind, then.after.info.channel) == (kind or "chat", channel)


def test_an_explicit_channel_key_and_project_are_kept():
    command = create(
        kind="task", channel="telegram", key="main:telegram:42:dm", project_id="p1", parent_id="s0"
    )
    session.given().when(command).then(
        [SessionCreated(SID, "main:telegram:42:dm", "task", "telegram", "alice", "main", "", "p1", "s0", T0)]
    )


# -- archive ----------------------------------------------------------------------------------


def test_the_owner_archives_once():
    then = session.given([created()]).when(Archive("alice", "main"))
    then.then([SessionArchived(SID, "alice", T0)])
    assert then.after.info.archived
    session.given([created(), SessionArchived(SID, "alice", T0)]).when(Archive("alice", "main")).then([])


def test_archiving_needs_the_owner_and_the_session():
    session.given([created()]).when(Archive("bob", "main")).then(SessionForbiddenError)
    session.given([created()]).when(Archive("alice", "other")).then(SessionForbiddenError)
    session.given().when(Archive("alice", "main")).then(SessionNotFoundError)


# -- turns ------------------------------------------------------------------------------------


def started(turn="t1", entry="chat", prompt="hi", extra=(), excluded=(), system="") -> TurnStarted:
    return TurnStarted(SID, turn, entry, prompt, extra, excluded, system, T0)


def recorded(type_, id_="", turn="t1", **data) -> TurnEventRecorded:
    return TurnEventRecorded(SID, turn, type_, id_, data, T0)


def test_a_turn_starts_on_a_live_session_with_its_per_run_options():
    command = StartTurn("t1", "task", "go", ("task_control",), ("bash",), "be brief")
    then = session.given([created()]).when(command)
    then.then(
        [started(entry="task", prompt="go", extra=("task_control",), excluded=("bash",), system="be brief")]
    )
    assert (then.after.turns, then.after.turn.turn_id) == (1, "t1")


def test_no_turn_on_a_missing_or_archived_session():
    session.given().when(StartTurn("t1", "chat", "hi")).then(SessionNotFoundError)
    session.given([created(), SessionArchived(SID, "alice", T0)]).when(StartTurn("t1", "chat", "hi")).then(
        SessionArchivedError
    )


def test_an_unfinished_turn_is_recorded_as_interrupted_when_the_next_starts():
    given = session.given([created(), started(), recorded("assistant.message", "e1", content="partial")])
    given.when(StartTurn("t2", "chat", "again")).then(
        [
            TurnFinished(
                SID, "t1", TURN_INTERRUPTED, "partial", "a later turn started before this one finished", T0
            ),
            started("t2", prompt="again"),
        ]
    )


def test_each_harness_event_is_recorded_once_per_id():
    given = session.given([created(), started(), recorded("assistant.delta", "e1", delta="he")])
    given.when(RecordTurnEvent("t1", "assistant.delta", "e1", {"delta": "he"})).then([])
    given.when(RecordTurnEvent("t1", "assistant.delta", "e2", {"delta": "llo"})).then(
        [recorded("assistant.delta", "e2", delta="llo")]
    )
    # Events without an id are never de-duplicated.
    session.given([created(), started(), recorded("warning", message="w")]).when(
        RecordTurnEvent("t1", "warning", "", {"message": "w"})
    ).then([recorded("warning", message="w")])


def test_an_event_for_a_turn_that_is_not_running_is_ignored():
    finished = TurnFinished(SID, "t1", TURN_SUCCEEDED, "", "", T0)
    session.given([created(), started(), finished]).when(RecordTurnEvent("t1", "warning")).then([])
    session.given([created(), started()]).when(RecordTurnEvent("t0", "warning")).then([])
    session.given([created()]).when(RecordTurnEvent("t1", "warning")).then([])


def test_idle_ends_the_turn_with_its_last_assistant_message():
    given = session.given(
        [
            created(),
            started(),
            recorded("assistant.message", "m1", content="one"),
            recorded("assistant.idle", "i"),
        ]
    )
    then = given.when(RecordTurnEvent("t1", "session.idle", "end"))
    then.then([recorded("session.idle", "end"), TurnFinished(SID, "t1", TURN_SUCCEEDED, "one", "", T0)])
    assert then.after.turn is None


def test_an_error_or_a_shutdown_fails_the_turn():
    given = session.given([created(), started()])
    given.when(RecordTurnEvent("t1", "session.error", "x", {"message": "boom"})).then(
        [recorded("session.error", "x", message="boom"), TurnFinished(SID, "t1", TURN_FAILED, "", "boom", T0)]
    )
    given.when(RecordTurnEvent("t1", "session.shutdown", "y", {"reason": "oom"})).then(
        [
            recorded("session.shutdown", "y", reason="oom"),
            TurnFinished(SID, "t1", TURN_FAILED, "", "The agent runtime stopped: oom", T0),
        ]
    )


def test_a_turn_is_finished_once():
    given = session.given([created(), started(), recorded("assistant.message", "m", content="so far")])
    given.when(FinishTurn("t1", TURN_FAILED, "sending prompt: down")).then(
        [TurnFinished(SID, "t1", TURN_FAILED, "so far", "sending prompt: down", T0)]
    )
    done = TurnFinished(SID, "t1", TURN_SUCCEEDED, "", "", T0)
    session.given([created(), started(), done]).when(FinishTurn("t1", TURN_INTERRUPTED)).then([])


def test_a_group_session_is_never_compacted():
    group = created(user="g1", group="g1")
    error = session.given([group]).when(Compact("t1", "summary", 6)).then(GroupCompactionUnsupportedError)
    assert str(error) == "compaction is not supported for group sessions"


def test_a_private_session_records_the_harness_summary():
    then = session.given([created()]).when(Compact("t9", "we talked", 6))
    then.then([SessionCompacted(SID, "t9", "we talked", 6, T0)])
    assert then.after.summary == "we talked"
    session.given().when(Compact("t9", "x", 6)).then(SessionNotFoundError)
