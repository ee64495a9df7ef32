"""Reads of the log's tail served from this process's last commits hold what the database holds."""

from __future__ import annotations

from eventlog import NO_STREAM, NewEvent, Record, open_log
from eventlog._recent import RecentCommits


def _rows(log):
    return [
        (r.seq, r.stream, r.version, r.data, r.meta_json, r.event_id, r.prev_hash, r.hash)
        for r in log.read_all()
    ]


def test_reads_after_commits_of_two_writers_on_one_file_agree_with_a_fresh_reader(tmp_path):
    path = tmp_path / "log.db"
    with open_log(path) as a, open_log(path) as b:
        a.append("s-a", [NewEvent("X", {"n": 1}), NewEvent("X", {"n": 2})])
        b.append("s-b", [NewEvent("X", {"n": 3})])  # another writer: a gap in a's window
        a.append("s-a", [NewEvent("X", {"n": 4})])
        retried = NewEvent("X", {"n": 5})
        a.append("s-c", [retried])
        a.append("s-c", [retried], NO_STREAM)  # an idempotent retry: its original, not a new one
        with open_log(path) as fresh:
            expected = _rows(fresh)
        assert [r[0] for r in expected] == [1, 2, 3, 4, 5]
        assert _rows(a) == expected
        assert _rows(b) == expected
        for after in range(6):
            assert [r.seq for r in a.read_all(after_seq=after)] == list(range(after + 1, 6))
            assert [r.seq for r in a.read_all(after_seq=after, to_seq=4)] == list(range(after + 1, 5))
        assert [r.data["n"] for r in a.read_all(after_seq=3, types=["X"])] == [4, 5]
        assert [r.seq for r in a.read_all(after_seq=3, types=["Y"])] == []
        b.append("s-b", [NewEvent("Y", {})])  # past a's window: read from the database
        assert [r.seq for r in a.read_all(after_seq=4)] == [5, 6]


def test_a_reader_of_this_process_commits_does_not_read_them_back(tmp_path):
    with open_log(tmp_path / "log.db") as log:
        log.append("s-a", [NewEvent("X", {"n": 1})])
        reads: list[int] = []
        records_after = log._records_after

        def counting(*args):
            records, more = records_after(*args)
            reads.append(len(records))
            return records, more

        log._records_after = counting  # type: ignore[method-assign]
        log.append_many(
            [("s-b", [NewEvent("X", {"n": 2})], NO_STREAM), ("s-c", [NewEvent("X", {})], NO_STREAM)]
        )
        assert [r.seq for r in log.read_all(after_seq=1)] == [2, 3]
        assert reads == [0]  # one query past the window, which found nothing more


def test_the_window_keeps_only_consecutive_new_records():
    from eventlog._recent import RecentCommits

    def rec(seq):
        return Record(seq, "s-a", seq, "X", 1, {}, b"{}", f"id{seq}", 0, "", "")

    recent = RecentCommits(keep=4)
    recent.add([rec(1), rec(2)])
    recent.add([rec(3), rec(1), rec(4)])  # an old record among new ones is left out
    assert [r.seq for r in recent.after(0, None)] == [1, 2, 3, 4]
    recent.add([rec(5), rec(2), rec(7)])  # not consecutive: 7 starts the window anew
    assert recent.after(0, None) == []
    assert [r.seq for r in recent.after(6, None)] == [7]
    for seq in range(8, 20):
        recent.add([rec(seq)])
    assert [r.seq for r in recent.after(18, None)] == [19]
    assert 4 <= len(recent._records) <= 8  # trimmed to `keep` now and then


def test_the_window_of_recent_commits_is_bounded_in_bytes_not_only_in_records():
    # Large records (a run's reports near their size bound) must not pin their payloads: the
    # window keeps about KEEP_BYTES of them, whatever their number.
    window = RecentCommits(keep=256, keep_bytes=100_000)
    payload = "x" * 40_000
    window.add(_record(seq, {"payload": payload}) for seq in range(1, 21))
    kept = window.after(20 - len(window._records), None)
    assert 0 < sum(len(r.data["payload"]) for r in kept) <= 2 * 100_000
    assert [r.seq for r in kept] == list(range(21 - len(kept), 21))  # the newest, consecutive
    window.add([_record(21, {"n": 1})])  # small records still fill it as before
    assert window._records[-1].seq == 21


def _record(seq: int, data: dict) -> Record:
    return Record(seq, "s-a", seq, "X", 1, data, b"{}", f"e{seq}", 0, "", "")
