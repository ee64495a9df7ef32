"""Snapshots: the store in the log's database, and how the runner writes and restores them."""

from __future__ import annotations

import sqlite3

import pytest

from eventlog import (
    ManualClock,
    NewEvent,
    ReadOnlyDatabaseError,
    Snapshot,
    SnapshotsUnsupported,
    open_log,
    snapshot_store,
)
from projections import Views, default_views, state_digest
from projections._snapshots import load_snapshot, make_snapshot, snapshot_json


def found(snapshot: Snapshot | None) -> Snapshot:
    assert snapshot is not None
    return snapshot


def snap(seq: int, name: str = "v", version: int = 1, data: bytes | None = b"{}") -> Snapshot:
    return Snapshot(name, version, seq, f"h{seq}", f"d{seq}", len(data or b""), data)


def test_a_read_only_log_reads_snapshots_and_refuses_to_store(tmp_path):
    path = tmp_path / "ro.db"
    log = open_log(path)
    snapshot_store(log).put(snap(5))
    log.close()
    ro = open_log(path, readonly=True)
    store = snapshot_store(ro)
    assert store.readonly
    assert found(store.nearest("v", 1)).seq == 5
    with pytest.raises(ReadOnlyDatabaseError):
        store.put(snap(6))
    ro.close()


def test_a_read_only_log_without_the_table_has_no_snapshots(tmp_path):
    path = tmp_path / "old.db"
    open_log(path).close()  # a database from before snapshots: no `snapshots` table
    ro = open_log(path, readonly=True)
    assert snapshot_store(ro).list() == []
    assert Views(ro).catch_up() == 0
    ro.close()


def test_backends_without_a_store_say_so():
    class Bare:
        url = "bare://"

    with pytest.raises(SnapshotsUnsupported) as caught:
        snapshot_store(Bare())  # type: ignore[arg-type]
    assert isinstance(caught.value, NotImplementedError)


def test_every_view_loads_what_it_dumped(db, open_db):
    log = open_db()
    views = Views(log, snapshots=None)
    head = views.catch_up()
    for view in default_views():
        state = views.state(view.name)
        snapshot = make_snapshot(view, state, head, "h")
        again = load_snapshot(view, snapshot)
        assert state_digest(view, again) == state_digest(view, state) == snapshot.digest
        assert snapshot.size == len(snapshot_json(snapshot))


def test_runner_stores_snapshots_on_the_grid_and_restores_the_newest(db, open_db):
    log = open_db()
    views = Views(log, snapshot_every=300)
    head = views.catch_up()
    stored = snapshot_store(log).list()
    assert stored
    assert {s.seq for s in stored} <= {300, 600, 900, 1200}
    assert {s.name for s in stored if s.seq == 300} == set(
        views.runner.views
    )  # the first mark: every live view
    digests = views.digests()

    again = Views(open_db())
    assert again.catch_up() == head
    newest = max(s.seq for s in stored)
    assert max(again.runner.restored.values()) == newest  # started from a snapshot, not seq 0
    assert again.digests() == digests


def test_a_large_view_is_stored_less_often(db, open_db):
    # The timeline's dump is the largest: at 8 bytes per event it is not due at every mark.
    views = Views(open_db(), snapshot_every=100, snapshot_bytes_per_event=8)
    views.catch_up()
    seqs: dict[str, list[int]] = {}
    for s in snapshot_store(views.log).list():
        seqs.setdefault(s.name, []).append(s.seq)
    assert len(seqs["timeline"]) < len(seqs["pending_approvals"]) == 12
    for seqs_of_view in seqs.values():
        assert all(seq % 100 == 0 for seq in seqs_of_view)


def test_snapshots_of_another_history_are_not_loaded(db, open_db, tmp_path):
    log = open_db()
    Views(log, snapshot_every=600).catch_up()
    stored = snapshot_store(log).list()
    log.close()
    # Another database with the same snapshots but a different history: hashes do not match.
    other = tmp_path / "other.db"
    clock = ManualClock()
    olog = open_log(other, clock=clock)
    olog.append("run-x", [NewEvent("RunRegistered", {"run_id": "x", "token_sha256": "", "registered_at": None,
                                                     "at": "2026-01-01T00:00:00+00:00"})] * 1)  # fmt: skip
    for _i in range(1, 700):
        olog.append("run-x", [NewEvent("RunHeartbeat", {"run_id": "x", "at": "2026-01-01T00:00:00+00:00"})])
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT name, version, seq, hash, digest, size, data FROM snapshots").fetchall()
    conn.close()
    ostore = snapshot_store(olog)
    for row in rows:
        ostore.put(Snapshot(*row))
    assert len(ostore.list()) == len(stored)
    views = Views(olog)
    views.catch_up()
    assert views.runner.restored == {}  # none matched this log's chain
    assert [r.run_id for r in views.runs()] == ["x"]
    olog.close()


def test_a_failing_store_stops_snapshots_not_views(db, open_db):
    log = open_db()
    views = Views(log, snapshot_every=100)
    store = views.runner.store
    assert store is not None

    def broken(_snapshot: Snapshot) -> None:
        raise ReadOnlyDatabaseError(str(db), "the disk went read-only")

    store.put = broken  # type: ignore[method-assign,assignment]
    assert views.catch_up() == 1200
    assert isinstance(views.runner.snapshot_error, ReadOnlyDatabaseError)
    assert len(views.runs()) == 12
