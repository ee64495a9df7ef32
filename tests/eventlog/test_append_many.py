"""EventLog.append_many: several appends from one thread, group-committed, each with its own outcome."""

from __future__ import annotations

import threading

from eventlog import NO_STREAM, ConcurrencyError, NewEvent, open_log


def test_each_append_succeeds_or_fails_on_its_own_in_one_commit(tmp_path):
    with open_log(tmp_path / "log.db") as log:
        log.append("s-b", [NewEvent("X", {"n": 0})])
        out = log.append_many(
            [
                ("s-a", [NewEvent("X", {"n": 1})], NO_STREAM),
                ("s-b", [NewEvent("X", {"n": 2})], NO_STREAM),  # exists: refused alone
                ("s-c", [NewEvent("X", {"n": 3}), NewEvent("X", {"n": 4})], NO_STREAM),
            ]
        )
        assert isinstance(out[1], ConcurrencyError)
        a, c = out[0], out[2]
        assert isinstance(a, list)
        assert isinstance(c, list)
        assert [r.version for r in a + c] == [1, 1, 2]
        assert len({r.recorded_at for r in a + c}) == 1  # one transaction
        assert [r.data["n"] for r in log.read_all()] == [0, 1, 3, 4]
        assert log.append_many([]) == []


def test_batches_and_single_appends_from_many_threads_all_land(tmp_path):
    with open_log(tmp_path / "log.db") as log:
        failures: list[object] = []

        def batches(i: int) -> None:
            for k in range(50):
                got = log.append_many([(f"t{i}-{k}-{j}", [NewEvent("X", {})], NO_STREAM) for j in range(3)])
                failures.extend(o for o in got if not isinstance(o, list))

        def singles(i: int) -> None:
            for k in range(50):
                log.append(f"u{i}-{k}", [NewEvent("X", {})])

        threads = [threading.Thread(target=f, args=(i,)) for i in range(3) for f in (batches, singles)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert failures == []
        assert log.head().seq == 3 * 50 * 3 + 3 * 50
        assert log.verify().ok


def test_meta_of_an_append_is_stored_with_each_catalogue_event_as_encode_stores_it(tmp_path):
    from datetime import UTC, datetime

    from eventlog import ANY, encode
    from eventlog.events import RunReported

    meta = {"actor": "run:a", "n": 1}
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    events = [RunReported("a", "working", None, at), RunReported("a", "busy", '{"x":1}', at)]
    with open_log(tmp_path / "log.db") as log:
        (fast,) = log.append_many([("run-a", events, NO_STREAM, meta)])
        plain = log.append("run-b", [encode(e, meta=meta) for e in events])
        bare = log.append("run-c", events, ANY, meta=meta)
        for got in (fast, bare):
            assert isinstance(got, list)
            assert [r.meta for r in got] == [meta, meta]
            assert [r.meta_json for r in got] == [r.meta_json for r in plain]
            assert [r.data for r in got] == [r.data for r in plain]
        # A NewEvent keeps its own meta; an append without meta stores {} with an Event.
        (mixed,) = log.append_many(
            [("run-d", [NewEvent("X", {}, meta={"own": 1}), events[0]], NO_STREAM, None)]
        )
        assert isinstance(mixed, list)
        assert [r.meta for r in mixed] == [{"own": 1}, {}]
        assert [r.meta for r in log.read("run-a")] == [meta, meta]
        assert log.verify().ok
