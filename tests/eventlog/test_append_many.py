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
