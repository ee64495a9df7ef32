"""The session service's entry points (seed §3.6 "Service"): chat, delegate, scheduler, task, goals."""

from __future__ import annotations

import uuid

import pytest

from actors import (
    TURN_FAILED,
    TURN_SUCCEEDED,
    ChatRequest,
    DelegateRequest,
    HarnessRequest,
    InvalidSessionRequestError,
    SchedulerChatRequest,
    ScriptedHarness,
    SessionArchivedError,
    SessionForbiddenError,
    SessionNotFoundError,
    SessionRequest,
    SessionWrongKindError,
    System,
    TaskChatRequest,
    uuid7_time_millis,
)

from .conftest import reply

T = 10.0  # seconds any single wait may take before the test fails


def chat(system, **fields):
    fields.setdefault("user_id", "alice")
    fields.setdefault("agent_id", "main")
    fields.setdefault("message", "hi")
    return system.sessions.chat(ChatRequest(**fields))


def types(events):
    return [e.type for e in events]


def only_error(stream) -> str:
    events = stream.collect(timeout=T)
    assert types(events) == ["session.error"], events
    return events[0].data["message"]


# -- chat ------------------------------------------------------------------------------------


def test_chat_without_an_id_creates_a_new_time_ordered_session(system, clock):
    stream = chat(system)
    assert types(stream.collect(timeout=T)) == ["user.message", "assistant.message", "session.idle"]
    info = system.sessions.get(stream.session_id)
    assert uuid.UUID(info.id).version == 7
    assert uuid7_time_millis(info.id) == int(clock.now().timestamp() * 1000)
    assert (info.kind, info.channel, info.user_id, info.agent_id) == ("chat", "web", "alice", "main")


def test_chat_with_an_id_only_resumes(system):
    first = chat(system)
    first.collect(timeout=T)
    again = chat(system, session_id=first.session_id, message="again")
    assert types(again.collect(timeout=T))[-1] == "session.idle"
    assert [t.prompt for t in system.sessions.history(first.session_id)] == ["hi", "again"]


def test_chat_never_creates_a_named_session(system):
    assert only_error(chat(system, session_id="made-up")) == "resolve session: session not found: made-up"
    assert system.sessions.get("made-up") is None
    assert system.views.sessions() == []


def test_chat_failures_arrive_as_one_error_event(system):
    session = system.sessions.new_session("alice", "main")
    stream = chat(system, session_id=session.id, user_id="bob")
    assert only_error(stream) == "resolve session: session access forbidden"
    assert isinstance(stream.error, SessionForbiddenError)
    assert only_error(chat(system, user_id="")) == "resolve session: UserID is required"
    assert only_error(chat(system, agent_id="")) == "resolve session: AgentID is required"


def test_chat_requires_a_kind_only_when_the_request_names_one(system):
    task = system.sessions.mint_task_session("alice", "main")
    chat(system, session_id=task.id).collect(timeout=T)  # no kind named: any kind resumes
    message = only_error(chat(system, session_id=task.id, kind="chat"))
    assert message == 'resolve session: session kind mismatch: got "task", want "chat"'


def test_chat_in_a_group_uses_a_session_owned_by_the_group(system):
    stream = chat(system, group_id="g1")
    stream.collect(timeout=T)
    info = system.sessions.get(stream.session_id)
    assert (info.user_id, info.group_id, info.key) == ("g1", "g1", "main:group:g1")
    assert only_error(chat(system, session_id=info.id)) == "resolve session: session access forbidden"
    chat(system, session_id=info.id, user_id="bob", group_id="g1").collect(timeout=T)
    assert system.views.session(info.id).turns == 2


def test_an_archived_session_is_not_resumed(system):
    session = system.sessions.new_session("alice", "main")
    system.sessions.archive_session("alice", "main", session.id)
    assert only_error(chat(system, session_id=session.id)) == "resolve session: session is archived"
    assert system.sessions.get(session.id).archived


def test_archiving_checks_the_caller(system):
    session = system.sessions.new_session("alice", "main")
    with pytest.raises(SessionForbiddenError):
        system.sessions.archive_session("bob", "main", session.id)
    with pytest.raises(SessionNotFoundError):
        system.sessions.archive_session("alice", "main", "nope")
    with pytest.raises(InvalidSessionRequestError, match="AgentID is required"):
        system.sessions.archive_session("alice", "", session.id)
    system.sessions.archive_session("alice", "main", session.id)
    system.sessions.archive_session("alice", "main", session.id)  # once archived, archived
    assert [r.type for r in system.log.read(f"session-{session.id}")] == ["SessionCreated", "SessionArchived"]


# -- new sessions ----------------------------------------------------------------------------


def test_new_session_and_mint_task_session_always_mint_new_ids(system):
    a = system.sessions.new_session("alice", "main", project_id="p1")
    b = system.sessions.new_session("alice", "main", kind="delegate")
    task = system.sessions.mint_task_session("alice", "main", "p1")
    assert len({a.id, b.id, task.id}) == 3
    assert a.id < b.id < task.id  # time-ordered, even under a clock that stands still
    assert (a.kind, a.channel, a.project_id) == ("chat", "web", "p1")
    assert (b.kind, b.channel) == ("delegate", "delegate")
    assert (task.kind, task.channel, task.project_id) == ("task", "task", "p1")


# -- delegate --------------------------------------------------------------------------------


def test_delegate_runs_a_child_session_and_returns_its_output(system):
    parent = system.sessions.new_session("alice", "main")
    result = system.sessions.delegate(
        DelegateRequest(user_id="alice", agent_id="main", task="research", parent_session_id=parent.id),
        timeout=T,
    )
    assert (result.output, result.complete) == ("echo: research", True)
    child = system.sessions.get(result.session_id)
    assert (child.kind, child.channel, child.parent_id) == ("delegate", "delegate", parent.id)
    again = system.sessions.delegate(
        DelegateRequest(session_id=child.id, user_id="alice", agent_id="main", task="more"), timeout=T
    )
    assert again.session_id == child.id


def test_delegate_never_reserves_an_id_and_resumes_only_delegate_sessions(system):
    request = DelegateRequest(session_id="model-picked", user_id="alice", agent_id="main", task="x")
    with pytest.raises(SessionNotFoundError, match="session not found: model-picked"):
        system.sessions.delegate(request)
    assert system.sessions.get("model-picked") is None
    chat_session = system.sessions.new_session("alice", "main")
    with pytest.raises(SessionWrongKindError):
        system.sessions.delegate(
            DelegateRequest(session_id=chat_session.id, user_id="alice", agent_id="main", task="x")
        )


def test_a_failed_delegate_turn_is_incomplete(system):
    result = system.sessions.delegate(
        DelegateRequest(user_id="alice", agent_id="main", task="fail"), timeout=T
    )
    assert (result.complete, result.error) == (False, "boom")


# -- trusted ids: scheduler and task ---------------------------------------------------------


def test_the_scheduler_creates_its_session_under_the_exact_id_then_resumes_it(system):
    request = SchedulerChatRequest(session_id="sched:daily", user_id="alice", agent_id="main", message="run")
    assert types(system.sessions.chat_for_scheduler(request).collect(timeout=T))[-1] == "session.idle"
    info = system.sessions.get("sched:daily")
    assert (info.kind, info.channel) == ("scheduler", "scheduler")
    system.sessions.chat_for_scheduler(request).collect(timeout=T)
    assert system.views.session("sched:daily").turns == 2


def test_trusted_ids_still_check_the_kind(system):
    system.sessions.chat_for_task(TaskChatRequest(session_id="s1", user_id="alice", agent_id="main")).collect(
        timeout=T
    )
    stream = system.sessions.chat_for_scheduler(
        SchedulerChatRequest(session_id="s1", user_id="alice", agent_id="main")
    )
    assert only_error(stream) == 'resolve session: session kind mismatch: got "task", want "scheduler"'
    system.sessions.new_session("alice", "main")
    chat_id = system.views.sessions()[-1].session_id
    stream = system.sessions.chat_for_task(
        TaskChatRequest(session_id=chat_id, user_id="alice", agent_id="main")
    )
    assert only_error(stream) == 'resolve session: session kind mismatch: got "chat", want "task"'


def test_per_run_extra_tools_never_leak_into_later_turns(log, clock, workspace):
    requests: list[HarnessRequest] = []
    harnesses: list[ScriptedHarness] = []

    def factory(request: HarnessRequest) -> ScriptedHarness:
        requests.append(request)
        harnesses.append(ScriptedHarness(reply, threaded=False))
        return harnesses[-1]

    with System.open(
        log, clock=clock, scheduler=False, session_harness=factory, workspace=workspace
    ) as system:
        base = TaskChatRequest(session_id="task-1", user_id="alice", agent_id="main", message="work")
        with_tools = TaskChatRequest(
            session_id="task-1",
            user_id="alice",
            agent_id="main",
            message="work",
            extra_tools=("task_control",),
        )
        for request in (with_tools, base, base):
            system.sessions.chat_for_task(request).collect(timeout=T)
        # The turn with extra tools had a harness of its own, closed when it ended; the later
        # turns share one built without them.
        assert [r.extra_tools for r in requests] == [("task_control",), ()]
        assert harnesses[0].closed
        assert not harnesses[1].closed
        assert [len(h.prompts) for h in harnesses] == [1, 2]
        history = system.sessions.history("task-1")
        assert [t.extra_tools for t in history] == [("task_control",), (), ()]


# -- goal decomposition ----------------------------------------------------------------------


def test_goal_decomposition_resumes_only_a_delegate_session(system):
    request = TaskChatRequest(session_id="plan-1", user_id="alice", agent_id="main", message="plan")
    assert only_error(system.sessions.chat_for_goal_decomposition(request)) == (
        "resolve session: session not found: plan-1"
    )
    assert system.sessions.get("plan-1") is None
    # The task path creates a task session, which the goal path then refuses by kind.
    system.sessions.chat_for_task(request).collect(timeout=T)
    assert only_error(system.sessions.chat_for_goal_decomposition(request)) == (
        'resolve session: session kind mismatch: got "task", want "delegate"'
    )
    plan = system.sessions.new_session("alice", "main", kind="delegate")
    request = TaskChatRequest(session_id=plan.id, user_id="alice", agent_id="main", message="plan")
    assert (
        types(system.sessions.chat_for_goal_decomposition(request).collect(timeout=T))[-1] == "session.idle"
    )
    assert [t.entry for t in system.sessions.history(plan.id)] == ["goal_decomposition"]


# -- history ---------------------------------------------------------------------------------


def test_history_holds_every_turn_and_event(system):
    stream = chat(system)
    stream.collect(timeout=T)
    chat(system, session_id=stream.session_id, message="fail").collect(timeout=T)
    first, second = system.sessions.history(stream.session_id)
    assert (first.entry, first.prompt, first.status, first.output) == (
        "chat",
        "hi",
        TURN_SUCCEEDED,
        "echo: hi",
    )
    assert types(first.events) == ["user.message", "assistant.message", "session.idle"]
    assert (second.status, second.error) == (TURN_FAILED, "boom")
    assert first.finished_at is not None
    with pytest.raises(SessionNotFoundError):
        system.sessions.history("nope")


def test_archived_sessions_keep_their_history(system):
    stream = chat(system)
    stream.collect(timeout=T)
    system.sessions.archive_session("alice", "main", stream.session_id)
    assert len(system.sessions.history(stream.session_id)) == 1
    with pytest.raises(SessionArchivedError):
        system.sessions.compact_session(stream.session_id, user_id="alice", agent_id="main")


# -- the registry (Ensure) -------------------------------------------------------------------


def test_ensure_with_an_empty_id_creates_only_when_asked(system):
    with pytest.raises(SessionNotFoundError) as caught:
        system.sessions.ensure(SessionRequest(user_id="alice", agent_id="main"))
    assert str(caught.value) == "session not found"
    made = system.sessions.ensure(SessionRequest(user_id="alice", agent_id="main", create_if_missing=True))
    assert uuid.UUID(made.id).version == 7
    assert (
        system.sessions.ensure(SessionRequest(session_id=made.id, user_id="alice", agent_id="main")) == made
    )


def test_ensure_validates_before_it_touches_the_log(system):
    head = system.log.head().seq
    with pytest.raises(InvalidSessionRequestError, match="UserID is required"):
        system.sessions.ensure(SessionRequest(agent_id="main", create_if_missing=True))
    with pytest.raises(InvalidSessionRequestError, match="AgentID is required"):
        system.sessions.ensure(SessionRequest(user_id="alice", create_if_missing=True))
    assert system.log.head().seq == head
