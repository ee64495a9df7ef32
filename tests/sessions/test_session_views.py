"""The sessions, agent activity and projects views: rows, last activity, time travel, snapshots."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from actors import ChatRequest, System
from eventlog import Record, open_log
from projections import AgentActivityView, ProjectsView, SessionsView, Views, canonical
from projections._fold import fold_records
from projections.sessions import last_active

T = 10.0


def talk(system, clock, **fields) -> str:
    fields.setdefault("user_id", "alice")
    fields.setdefault("agent_id", "main")
    fields.setdefault("message", "hi")
    clock.advance(1)
    stream = system.sessions.chat(ChatRequest(**fields))
    stream.collect(timeout=T)
    return stream.session_id


def test_the_sessions_view_shows_every_session(system, clock):
    start = clock.now()
    sid = talk(system, clock)
    talk(system, clock, session_id=sid, message="again")
    system.sessions.compact_session(sid, user_id="alice", agent_id="main", timeout=T)
    clock.advance(5)
    task = system.sessions.mint_task_session("bob", "helper", "p1")
    system.sessions.archive_session("bob", "helper", task.id)
    first, second = system.views.sessions()
    assert (first.session_id, first.kind, first.channel, first.user_id, first.agent_id) == (
        sid,
        "chat",
        "web",
        "alice",
        "main",
    )
    assert (first.turns, first.compactions, first.archived, first.open_turn) == (3, 1, False, "")
    assert first.created_at == start + timedelta(seconds=1)
    assert first.last_active == start + timedelta(seconds=2)
    assert (second.session_id, second.kind, second.project_id, second.archived) == (
        task.id,
        "task",
        "p1",
        True,
    )
    assert second.last_active == second.created_at == clock.now()


def test_agent_activity_is_the_last_activity_per_agent_for_one_user(system, clock):
    talk(system, clock, agent_id="main")
    talk(system, clock, agent_id="helper")
    main_last = clock.now()
    talk(system, clock, agent_id="helper")
    talk(system, clock, user_id="bob", agent_id="main")
    talk(system, clock, group_id="g1", agent_id="main")  # owned by the group, not by alice
    assert system.views.agent_activity("alice") == {
        "helper": main_last + timedelta(seconds=1),
        "main": main_last - timedelta(seconds=1),
    }
    assert system.views.agent_activity("bob") == {"main": clock.now() - timedelta(seconds=1)}
    assert system.views.agent_activity("g1") == {"main": clock.now()}
    assert system.views.agent_activity("nobody") == {}


def record(seq, type_, **data) -> Record:
    return Record(seq, f"session-{data['session_id']}", seq, type_, 1, data, b"{}", f"e{seq}", 0, "", "")


def test_activity_keeps_the_latest_time_even_if_a_later_record_is_older():
    # Another process with a clock behind ours may commit after us.
    created = {"key": "", "kind": "chat", "channel": "web", "user_id": "alice", "agent_id": "main"}
    created |= {"group_id": "", "project_id": "", "parent_id": ""}
    view, sessions = AgentActivityView(), SessionsView()
    records = [
        record(1, "SessionCreated", session_id="s1", at="2026-01-01T12:00:00+00:00", **created),
        record(2, "TurnStarted", session_id="s1", turn_id="t1", at="2026-01-01T11:00:00+00:00"),
    ]
    states = fold_records([view, sessions], records, {view.name: view.initial(), sessions.name: {}})
    assert last_active(states[view.name], "alice") == {"main": datetime(2026, 1, 1, 12, tzinfo=UTC)}
    assert states[sessions.name]["s1"].last_active == datetime(2026, 1, 1, 12, tzinfo=UTC)


def test_views_travel_back_in_time_and_diff(system, clock):
    sid = talk(system, clock)
    middle = system.log.head().seq
    at_middle = clock.now()
    talk(system, clock, session_id=sid)
    other = talk(system, clock, agent_id="helper")
    assert [r.session_id for r in system.views.sessions(at=middle)] == [sid]
    assert system.views.session(sid, at=middle).turns == 1
    assert system.views.agent_activity("alice", at=at_middle) == {"main": at_middle}
    diff = system.views.diff("sessions", a=middle, b=system.log.head().seq)
    assert [row["session_id"] for row in diff.added] == [other]
    assert [(c.key, c.fields) for c in diff.changed] == [(sid, ("last_active", "turns"))]


# -- the view contract: copy, dump and load --------------------------------------------------


@pytest.fixture
def records(system, clock, workspace):
    sid = talk(system, clock)
    talk(system, clock, session_id=sid, message="fail")
    talk(system, clock, group_id="g1")
    system.sessions.archive_session("alice", "main", sid)
    root = f"{workspace}/users/alice/agents/main"
    made = system.projects.create("alice", "main", "site", f"{root}/site")
    system.projects.update("alice", "main", made.id, description="d")
    system.projects.archive("alice", "main", made.id)
    gone = system.projects.create("alice", "main", "tmp", f"{root}/tmp")
    system.projects.delete("alice", "main", gone.id)
    return list(system.log.read_all())


VIEWS = [SessionsView(), AgentActivityView(), ProjectsView()]


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: v.name)
def test_load_of_a_dump_folds_on_exactly(view, records):
    half = len(records) // 2
    state = fold_records([view], records[:half], {view.name: view.initial()})[view.name]
    loaded = view.load(orjson.loads(canonical(view.dump(state))))
    assert canonical(view.dump(loaded)) == canonical(view.dump(state))
    on = fold_records([view], records[half:], {view.name: loaded})[view.name]
    whole = fold_records([view], records, {view.name: view.initial()})[view.name]
    assert canonical(view.dump(on)) == canonical(view.dump(whole))


@pytest.mark.parametrize("view", VIEWS, ids=lambda v: v.name)
def test_a_copy_is_not_changed_by_later_records(view, records):
    half = len(records) // 2
    state = fold_records([view], records[:half], {view.name: view.initial()})[view.name]
    copy = view.copy(state)
    frozen = canonical(view.dump(copy))
    fold_records([view], records[half:], {view.name: state})
    assert canonical(view.dump(copy)) == frozen


def test_views_restored_from_snapshots_equal_views_folded_from_scratch(db_path, clock, workspace):
    with System.open(db_path, clock=clock, scheduler=False, workspace=workspace) as system:
        for i in range(6):
            session = system.sessions.new_session(f"u{i % 2}", "main")
            system.sessions.archive_session(f"u{i % 2}", "main", session.id)
            system.projects.ensure("main", f"u{i}")
    names = ("sessions", "agent_activity", "projects")
    with open_log(db_path) as log:
        fresh = Views(log, snapshots=None)
        expected = {name: fresh.digest(name) for name in names}
        Views(log, snapshot_every=4).catch_up()  # stores snapshots as it folds
        restored = Views(log)
        restored.catch_up()
        assert set(names) <= set(restored.runner.restored)
        assert {name: restored.digest(name) for name in names} == expected
