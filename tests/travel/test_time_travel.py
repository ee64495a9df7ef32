"""Time travel: any view at any seq or time, a run at each of its events, diffs, checkpoints."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from eventlog import EventLog, ManualClock, NewEvent, open_log
from projections import GLOBAL_VIEWS, Checkpoints, Views, default_views
from projections._fold import fold_range
from projections._view import canonical
from projections.timeline import render

SEQS = (1, 87, 300, 555, 999, 1200)


def dumps_from_zero(log: EventLog, seq: int) -> dict[str, bytes]:
    views = default_views()
    states = fold_range(log, views, seq)
    return {v.name: canonical(v.dump(states[v.name])) for v in views}


def test_every_view_at_a_seq_equals_a_fold_from_zero(db, open_db):
    log = open_db()
    views = Views(log, snapshot_every=250, checkpoint_every=100)
    views.catch_up()  # live, with snapshots stored and in-memory checkpoints kept
    cold = Views(open_db())  # a fresh reader: stored snapshots only
    for seq in SEQS:
        expected = dumps_from_zero(log, seq)
        for name in views.names:
            assert canonical(views.dump(name, at=seq)) == expected[name], (name, seq)
            assert canonical(cold.dump(name, at=seq)) == expected[name], (name, seq)


def test_checkpoints_are_kept_as_deltas_and_restore_exactly(db, open_db):
    log = open_db()
    views = Views(log, snapshots=None, checkpoint_every=50)
    views.catch_up()
    checkpoints = views.runner.checkpoints
    assert len(checkpoints) > 5
    for seq in (50, 120, 650, 1199):
        states = fold_range(log, [v for v in default_views() if v.name in GLOBAL_VIEWS], seq)
        for name in GLOBAL_VIEWS:
            found = checkpoints.restore(seq, name)
            assert found is not None
            at, state = found
            assert at <= seq
            assert seq - at < 2 * checkpoints.every
            replayed = fold_range(log, [v for v in default_views() if v.name == name], at)[name]
            assert state == replayed
        assert views.runner.fold_until(seq, list(GLOBAL_VIEWS)) == states


def churn(rng: random.Random, rows: dict[int, object], keys: int) -> None:
    """Up to three changes to `rows`: a new row object under a random key, or a key removed."""
    for _ in range(rng.randint(0, 3)):
        key = rng.randrange(keys)
        if rng.random() < 0.2:
            rows.pop(key, None)
        else:
            rows[key] = object()


def test_checkpoints_merge_when_thinned():
    rng = random.Random(5)
    checkpoints = Checkpoints(every=1, budget=60, full_every=3, rows_per_event=0)
    live: dict[str, dict[int, object]] = {"a": {}}
    truth = {}
    for seq in range(1, 200):
        churn(rng, live["a"], 30)
        if checkpoints.due(seq):
            checkpoints.add(seq, live)
        truth[seq] = dict(live["a"])
    assert checkpoints.every > 1
    assert checkpoints.size <= 60 + 30
    for seq in range(1, 200):
        found = checkpoints.restore(seq, "a")
        if found is not None:
            assert found[1] == truth[found[0]]


def test_seq_at_is_a_binary_search_over_recorded_times(tmp_path):
    clock = ManualClock()
    start = clock.now()
    log = open_log(tmp_path / "t.db", clock=clock)
    for i in range(40):
        log.append(f"run-{i % 3}", [NewEvent("Noted", {"i": i})] * 1)
        if i % 4 == 3:
            clock.advance(1)  # four records share each second
    assert log.seq_at(start - timedelta(seconds=1)) == 0
    assert log.seq_at(start) == 4
    assert log.seq_at(start + timedelta(seconds=2, milliseconds=500)) == 12
    assert log.seq_at(start + timedelta(days=1)) == 40
    views = Views(log)
    assert views.resolve_at(start + timedelta(seconds=3)) == 16
    with pytest.raises(ValueError, match="naive"):
        views.resolve_at(start.replace(tzinfo=None))
    with pytest.raises(ValueError, match="a seq >= 0"):
        views.resolve_at(-1)
    log.close()


def test_travel_by_time_names_the_last_seq_at_or_before_it(db, open_db):
    views = Views(open_db())
    moment = views.moment(555)
    assert moment is not None
    seq = views.resolve_at(moment)
    assert seq is not None
    assert seq >= 555  # later records may share the time
    assert [r.run_id for r in views.runs(at=moment)] == [
        r.run_id for r in views.runs(at=views.resolve_at(moment))
    ]


def test_a_runs_timeline_is_folded_from_its_stream_alone(db, open_db):
    views = Views(open_db())
    views.catch_up()
    for run in views.agent_runs()[::3]:
        seqs = [r.seq for r in views.log.read(run.stream)]
        for seq in [*seqs[::7], seqs[-1], run.first_seq - 1]:
            whole = render(views.state("timeline", at=seq), run.run_id)
            assert views.timeline(run.run_id, at=seq) == whole, (run.run_id, seq)
        assert views.timeline(run.run_id, at=seqs[-1]) == views.timeline(run.run_id)


def test_a_run_at_each_of_its_events(db, open_db):
    views = Views(open_db())
    run = views.agent_runs(at=1200)[4]
    moments = views.timeline_at_each_event(run.run_id)
    own = [r for r in views.log.read(run.stream) if r.data.get("run_id") == run.run_id]
    assert [m.seq for m in moments] == [r.seq for r in own]
    assert moments[0].type == "AgentRunStarted"
    assert moments[0].entries == ()
    assert moments[-1].status == "succeeded"
    statuses = [m.status for m in moments]
    assert statuses.index("running") < statuses.index("succeeded")
    for m in moments:
        assert list(m.entries) == views.timeline(run.run_id, at=m.seq)
    assert views.timeline_at_each_event("no-such-run") == []


def test_diff_of_a_timeline_between_two_moments(db, open_db):
    views = Views(open_db())
    run = views.agent_runs(at=1200)[2]
    moments = views.timeline_at_each_event(run.run_id)
    a, b = moments[4], moments[-1]
    diff = views.diff("timeline", run.run_id, a=a.seq, b=b.seq)
    before = {e.id for e in a.entries}
    after = {e.id for e in b.entries}
    assert {item["id"] for item in diff.added} == after - before
    assert {item["id"] for item in diff.removed} == before - after
    for change in diff.changed:
        assert change.key in before & after
        assert change.fields
    assert views.diff("timeline", run.run_id, a=b.seq, b=b.seq).empty
    reverse = views.diff("timeline", run.run_id, a=b.seq, b=a.seq)
    assert reverse.added == diff.removed
    assert reverse.removed == diff.added


def test_diff_of_the_global_views(db, open_db):
    views = Views(open_db())
    runs = views.diff("runs", a=300, b=900)
    assert {i["run_id"] for i in runs.added} == {r.run_id for r in views.runs(at=900)} - {
        r.run_id for r in views.runs(at=300)
    }
    assert all("last_seen" in c.fields for c in runs.changed)
    history = views.diff("approval_history", a=0, b=1200)
    assert len(history.added) == len(views.approval_history())
    assert not history.changed
    one = views.runs(at=600)[0].run_id
    narrowed = views.diff("finish_status", one, a=0, b=1200)
    assert [i["run_id"] for i in narrowed.added] == [one]
    with pytest.raises(ValueError, match="no diff for view"):
        views.diff("nope", a=1, b=2)
    with pytest.raises(ValueError, match="one run id"):
        views.diff("timeline", a=1, b=2)


def test_time_travel_never_appends(db, open_db):
    log = open_db()
    head = log.head()
    views = Views(log, snapshots=None)
    for seq in SEQS:
        views.digests(at=seq)
        views.timeline_at_each_event(views.agent_runs(at=1200)[0].run_id)
    assert log.head() == head


def drive(checkpoints: Checkpoints, rng: random.Random, seqs: int) -> dict[int, dict[int, object]]:
    """Churn one view of 40 keys for `seqs` seqs, taking the checkpoints due; its state at each seq."""
    live: dict[str, dict[int, object]] = {"a": {}}
    truth = {}
    for seq in range(1, seqs + 1):
        churn(rng, live["a"], 40)
        if checkpoints.due(seq):
            checkpoints.add(seq, live)
        truth[seq] = dict(live["a"])
    return truth


def test_old_checkpoints_are_kept_on_a_coarser_grid_and_still_restore_exactly():
    checkpoints = Checkpoints(every=10, budget=10**9, full_every=4, rows_per_event=0, recent=200, coarse=50)
    truth = drive(checkpoints, random.Random(9), 1000)
    seqs = checkpoints._seqs
    assert [s for s in seqs if s <= 800] == list(range(50, 801, 50))  # the past: one per 50 seqs
    assert [s for s in seqs if s > 800] == list(range(810, 1001, 10))  # the last 200: every 10
    assert checkpoints.every == 10  # no thinning: the coarse grid alone bounds the past
    for seq in range(1, 1001):
        found = checkpoints.restore(seq, "a")
        if seq < 50:
            assert found is None
            continue
        assert found is not None
        at, state = found
        assert at <= seq
        assert seq - at < (50 if seq <= 800 else 10)
        assert state == truth[at]


def test_a_checkpoint_forgets_only_keys_the_one_before_it_held():
    # Rows named by the keys their records touch (the runner's `touched` sets): a row that
    # came and went between two checkpoints, or a key touched for a view that never had it
    # (views keyed by the same field share one set), is not a removal to remember.
    rng = random.Random(11)
    checkpoints = Checkpoints(every=10, budget=10**9, full_every=8, rows_per_event=0, recent=100, coarse=50)
    live: dict[str, dict[int, object]] = {"open": {}, "never": {}}
    touched: dict[str, set[int]] = {"open": set(), "never": set()}
    truth = {}
    for seq in range(1, 1001):
        key = rng.randrange(10_000)
        touched["open"].add(key)
        touched["never"].add(key)
        live["open"][key] = object()
        if rng.random() < 0.9:  # most rows close again soon, many before the next checkpoint
            gone = rng.choice(list(live["open"]))
            touched["open"].add(gone)
            del live["open"][gone]
        if checkpoints.due(seq):
            checkpoints.add(seq, live, touched)
        truth[seq] = {name: dict(rows) for name, rows in live.items()}
    held = {name: [entry.removed.get(name, []) for entry in checkpoints._entries] for name in live}
    assert not any(held["never"])
    for entry, before in zip(checkpoints._entries[1:], checkpoints._entries, strict=False):
        if not entry.full and entry.seq - before.seq == 10:  # two neighbours on the fine grid
            state = checkpoints.restore(before.seq, "open")
            assert state is not None
            assert set(entry.removed.get("open", [])) <= set(state[1])
    for seq in checkpoints._seqs:
        found = checkpoints.restore(seq, "open")
        assert found is not None
        assert found[1] == truth[seq]["open"]


def test_checkpoints_beyond_the_horizon_are_dropped_and_the_rest_still_restore_exactly():
    checkpoints = Checkpoints(
        every=10, budget=10**9, full_every=4, rows_per_event=0, recent=100, coarse=50, horizon=400
    )
    truth = drive(checkpoints, random.Random(13), 2000)
    seqs = checkpoints._seqs
    assert seqs[0] >= 2000 - 400 - 50  # nothing older than the horizon (and its grid) is kept
    assert [s for s in seqs if s <= 1900] == list(range(seqs[0], 1901, 50))
    assert checkpoints.restore(seqs[0] - 1, "a") is None  # before the horizon: the caller folds
    for seq in range(seqs[0], 2001):
        found = checkpoints.restore(seq, "a")
        assert found is not None
        assert found[1] == truth[found[0]]


def test_travel_beyond_the_checkpoints_horizon_starts_from_a_stored_snapshot(db, open_db, monkeypatch):
    monkeypatch.setattr("projections._runner.CHECKPOINT_RECENT", 100)
    monkeypatch.setattr("projections._runner.CHECKPOINT_COARSE", 200)
    monkeypatch.setattr("projections._runner.CHECKPOINT_HORIZON", 400)
    log = open_db()
    views = Views(log, snapshot_every=250, checkpoint_every=50)
    views.catch_up()
    kept = views.runner.checkpoints._seqs
    assert kept[0] >= log.head().seq - 400 - 200  # the older ones were dropped
    for seq in SEQS:
        expected = dumps_from_zero(log, seq)
        for name in views.names:
            assert canonical(views.dump(name, at=seq)) == expected[name], (name, seq)
