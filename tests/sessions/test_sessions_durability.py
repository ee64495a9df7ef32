"""Sessions live in the log: they survive a restart, read the same rebuilt, and see other writers."""

from __future__ import annotations

from actors import ChatRequest, SessionArchivedError, SessionRequest, TaskChatRequest
from actors._aggregate import Execute
from actors.sessions.decider import StartTurn
from eventlog import open_log
from projections import Views

T = 10.0


def converse(system) -> str:
    """A session with a few turns of every kind of ending, and a compaction; returns its id."""
    stream = system.sessions.chat(ChatRequest(user_id="alice", agent_id="main", message="hi"))
    stream.collect(timeout=T)
    sid = stream.session_id
    for message in ("more", "fail"):
        system.sessions.chat(
            ChatRequest(session_id=sid, user_id="alice", agent_id="main", message=message)
        ).collect(timeout=T)
    system.sessions.compact_session(sid, user_id="alice", agent_id="main", timeout=T)
    return sid


def test_sessions_survive_closing_and_reopening_the_system(open_system, clock):
    first = open_system()
    sid = converse(first)
    task = first.sessions.mint_task_session("bob", "helper", "p1")
    archived = first.sessions.new_session("alice", "main")
    first.sessions.archive_session("alice", "main", archived.id)
    infos = {i: first.sessions.get(i) for i in (sid, task.id, archived.id)}
    rows, activity = first.views.sessions(), first.views.agent_activity("alice")
    first.close()

    clock.advance(60)
    second = open_system()
    assert {i: second.sessions.get(i) for i in infos} == infos
    assert second.views.sessions() == rows
    assert second.views.agent_activity("alice") == activity
    # The rules hold after the restart: the archived session stays closed, the others resume.
    error = second.sessions.chat(ChatRequest(session_id=archived.id, user_id="alice", agent_id="main"))
    assert isinstance(error.error, SessionArchivedError)
    second.sessions.chat(
        ChatRequest(session_id=sid, user_id="alice", agent_id="main", message="back")
    ).collect(timeout=T)
    assert [t.prompt for t in second.sessions.history(sid)] == ["hi", "more", "fail", "/compact", "back"]
    assert second.views.session(sid).last_active == clock.now()


def test_a_sessions_history_is_identical_live_and_rebuilt(open_system, db_path):
    system = open_system()
    sid = converse(system)
    live = [t.to_dict() for t in system.sessions.history(sid)]
    assert [t.to_dict() for t in system.views.session_history(sid)] == live
    rows = [r.to_dict() for r in system.views.sessions()]
    activity = system.views.agent_activity("alice")
    system.close()

    with open_log(db_path) as log:
        rebuilt = Views(log)
        assert [t.to_dict() for t in rebuilt.session_history(sid)] == live
        assert [r.to_dict() for r in rebuilt.sessions()] == rows
        assert rebuilt.agent_activity("alice") == activity


def test_history_as_of_a_past_moment(open_system):
    system = open_system()
    sid = converse(system)
    records = list(system.log.read(f"session-{sid}"))
    first_end = next(r.seq for r in records if r.type == "TurnFinished")
    (turn,) = system.views.session_history(sid, at=first_end)
    assert (turn.prompt, turn.status) == ("hi", "succeeded")
    (before,) = system.views.session_history(sid, at=first_end - 1)
    assert before.status == "running"
    assert system.views.session(sid, at=first_end).turns == 1


def test_another_writer_archiving_stops_this_process_from_starting_turns(open_system):
    here, there = open_system(), open_system()
    request = TaskChatRequest(session_id="task-7", user_id="alice", agent_id="main", message="step")
    here.sessions.chat_for_task(request).collect(timeout=T)  # this process now caches the session
    there.sessions.archive_session("alice", "main", "task-7")
    # Whether or not the follower has told our actor yet, the resolution reads the stream's
    # tail first, so it sees the archival.
    (event,) = here.sessions.chat_for_task(request).collect(timeout=T)
    assert event.data["message"] == "resolve session: session is archived"
    assert [t.prompt for t in there.sessions.history("task-7")] == ["step"]


def test_a_turn_left_open_by_a_dead_process_is_closed_by_the_next_one(open_system):
    first = open_system()
    session = first.sessions.new_session("alice", "main")
    first.sessions.actors.ask(session.id, Execute(StartTurn("t-dead", "chat", "lost")))
    first.close()  # nothing in this process ran that turn: the log alone says it is open

    second = open_system()
    second.sessions.chat(ChatRequest(session_id=session.id, user_id="alice", agent_id="main")).collect(
        timeout=T
    )
    dead, alive = second.sessions.history(session.id)
    assert (dead.turn_id, dead.status) == ("t-dead", "interrupted")
    assert alive.status == "succeeded"


def test_a_session_another_writer_creates_is_found_here(open_system):
    here, there = open_system(), open_system()
    plan = TaskChatRequest(session_id="plan-9", user_id="alice", agent_id="main", message="plan")
    (event,) = here.sessions.chat_for_goal_decomposition(plan).collect(timeout=T)
    assert event.data["message"] == "resolve session: session not found: plan-9"  # cached as missing
    there.sessions.ensure(
        SessionRequest(
            session_id="plan-9",
            user_id="alice",
            agent_id="main",
            kind="delegate",
            allow_exact_id_create=True,
            create_if_missing=True,
        )
    )
    events = here.sessions.chat_for_goal_decomposition(plan).collect(timeout=T)
    assert events[-1].type == "session.idle"
