"""Forking a controller run: a new stream from ForkedFrom and the origin's events; the origin untouched."""

from __future__ import annotations

import pytest

from eventlog import ManualClock, open_log
from projections import Views
from tools._forks import ForkError, fork_run


@pytest.fixture
def log(db):
    clock = ManualClock()
    log = open_log(db, clock=clock)
    yield log
    log.close()


def first_run_of_a_session(views: Views):
    runs = views.agent_runs()
    return next(r for r in runs if views.timeline_at_each_event(r.run_id)[0].entries == ())


def test_a_fork_copies_the_run_up_to_the_seq_and_leaves_the_origin_alone(log):
    views = Views(log)
    views.catch_up()
    origin = first_run_of_a_session(views)
    moments = views.timeline_at_each_event(origin.run_id)
    at = moments[len(moments) // 2].seq
    origin_stream = list(log.read(origin.stream))
    head = log.head()

    fork = fork_run(log, origin.run_id, at, actor="alice", reason="retry with the fixed tool", new_id="f1")

    assert (fork.run_id, fork.stream, fork.origin_stream, fork.at_seq) == (
        "f1",
        "controller-fork-f1",
        origin.stream,
        at,
    )
    assert list(log.read(origin.stream)) == origin_stream  # the origin is only read
    assert log.verify().ok
    assert fork.seq == head.seq + 1
    copied = list(log.read(fork.stream))
    opening = copied[0]
    assert opening.type == "ForkedFrom"
    assert opening.version == 1
    assert opening.data == {
        "run_id": "f1", "origin_run_id": origin.run_id, "origin_stream": origin.stream, "at_seq": at,
        "actor": "alice", "reason": "retry with the fixed tool", "at": opening.data["at"],
        "approval_id": "", "decision": "", "decided_by": "", "identity": "",  # a fork at a seq changes none
    }  # fmt: skip
    assert opening.schema == 2
    own = [r for r in origin_stream if r.seq <= at and r.data.get("run_id") == origin.run_id]
    assert [r.type for r in copied[1:]] == [r.type for r in own]
    assert fork.copied == len(own)
    for copy, source in zip(copied[1:], own, strict=True):
        assert copy.data["run_id"] == "f1"
        assert copy.meta["copied_from"] == {"seq": source.seq, "event_id": source.event_id}
        assert {k: v for k, v in copy.data.items() if k not in ("run_id", "controller_id")} == {
            k: v for k, v in source.data.items() if k not in ("run_id", "controller_id")
        }
    assert copied[1].data["controller_id"] == "fork-f1"


def test_the_forks_timeline_is_the_origins_at_the_fork_point(log):
    views = Views(log)
    views.catch_up()
    origin = first_run_of_a_session(views)
    for moment in views.timeline_at_each_event(origin.run_id)[3::9]:
        fork = fork_run(log, origin.run_id, moment.seq, actor="bob", new_id=f"at-{moment.seq}")
        assert views.timeline(fork.run_id) == list(moment.entries)  # live
        assert Views(log, snapshots=None).timeline(fork.run_id) == list(moment.entries)  # rebuilt
        row = views.agent_run(fork.run_id)
        assert row is not None
        assert (row.forked_from, row.fork_seq, row.stream) == (origin.run_id, moment.seq, fork.stream)
        assert row.status == moment.status  # the copied history says where the run was


def test_the_fork_shows_in_time_travel_only_after_it_was_made(log):
    views = Views(log)
    origin = views.agent_runs(at=log.head().seq)[0]
    before = log.head().seq
    fork = fork_run(log, origin.run_id, origin.first_seq + 5, actor="carol", new_id="later")
    assert views.agent_run("later", at=before) is None
    assert views.timeline("later", at=before) == []
    later = views.agent_run("later")
    assert later is not None
    assert later.forked_from == origin.run_id
    moments = views.timeline_at_each_event("later")
    assert moments[0].type == "ForkedFrom"
    assert moments[0].status == "forked"
    assert moments[0].seq == fork.seq


def test_forks_refuse_unknown_runs_and_seqs_outside_the_run(log):
    views = Views(log)
    origin = views.agent_runs(at=log.head().seq)[-1]
    with pytest.raises(ForkError, match="no agent run"):
        fork_run(log, "nope", 10, actor="a")
    with pytest.raises(ForkError, match="starts at seq"):
        fork_run(log, origin.run_id, origin.first_seq - 1, actor="a")
    with pytest.raises(ForkError, match="not in the log, which holds seqs 1 to"):
        fork_run(log, origin.run_id, log.head().seq + 1, actor="a")
    with pytest.raises(ForkError, match="not in the log, which holds seqs 1 to"):
        fork_run(log, origin.run_id, 0, actor="a")
