"""Importing stored records as they are, on every backend: the chain comes out identical, or nothing
past the last whole batch is written and the error names the seq."""

from __future__ import annotations

import pytest

from eventlog import (
    GENESIS_HASH,
    NO_STREAM,
    EventLog,
    ImportRefusedError,
    NewEvent,
    ReadOnlyDatabaseError,
    Record,
    open_log,
)
from eventlog._chain import canonical_bytes, make_hasher


@pytest.fixture
def source(clock):
    """A log of 9 records over three streams (an in-memory SQLite log of its own).

    The streams are users' own: flightlog's (run-, approval-, …) import catalogue events only.
    """
    with open_log(":memory:", clock=clock) as src:
        for i in range(3):
            for stream in ("task-a", "task-b", "deploy-c"):
                clock.advance(seconds=1)
                src.append(stream, [NewEvent("Tested", {"n": i, "s": stream}, meta={"actor": "t"})])
        yield src


def records_of(log: EventLog, after: int = 0) -> list[Record]:
    return list(log.read_all(after_seq=after))


def forge(records: list[Record], start: Record | None = None) -> list[Record]:
    """Records with their links and hashes recomputed, as someone rewriting the chain would."""
    hasher = make_hasher()
    prev = start.hash if start else GENESIS_HASH
    out = []
    for r in records:
        import orjson

        body = canonical_bytes(
            r.seq, r.stream, r.version, r.type, r.schema, orjson.dumps(r.data, option=orjson.OPT_SORT_KEYS),
            r.meta_json, r.event_id, r.recorded_us,
        )  # fmt: skip
        r = r._replace(prev_hash=prev, hash=hasher(prev, body))
        out.append(r)
        prev = r.hash
    return out


def test_an_import_into_an_empty_log_is_the_same_chain(source, log):
    head = log.import_records(source.read_all(), batch=4)

    assert head == source.head()
    assert records_of(log) == records_of(source)
    assert log.verify().head == source.verify().head
    assert log.stream_version("task-a") == 3
    # Appends continue the imported chain and the imported streams.
    more = log.append("task-a", [NewEvent("Tested", {"n": 3})], expect=3)
    assert (more[0].seq, more[0].version, more[0].prev_hash) == (10, 4, head.hash)
    assert log.verify().ok


def test_an_import_continues_a_log_that_ends_where_the_records_start(source, log):
    log.import_records(source.read_all(to_seq=5))
    log.import_records(source.read_all(after_seq=5))
    assert records_of(log) == records_of(source)


def test_progress_counts_the_records_written(source, log):
    seen: list[int] = []
    log.import_records(source.read_all(), batch=4, progress=seen.append)
    assert seen == [4, 8, 9]


def test_a_log_that_does_not_end_where_the_records_start_is_refused(source, log):
    log.append("other-1", [NewEvent("Tested", {})])
    with pytest.raises(ImportRefusedError, match="the log ends at seq 1 but the records start at seq 1") as e:
        log.import_records(source.read_all())
    assert (e.value.seq, e.value.imported, e.value.head) == (1, 0, 1)
    assert log.head().seq == 1
    # Same seq, another chain: the link is what is wrong.
    with pytest.raises(ImportRefusedError, match="prev_hash is not the hash of seq 1"):
        log.import_records(source.read_all(after_seq=1))


def test_a_tampered_record_stops_the_import_after_the_last_whole_batch(source, log):
    records = records_of(source)
    records[4] = records[4]._replace(data={"n": 99, "s": "task-b"})
    with pytest.raises(ImportRefusedError, match="seq 5: hash does not match") as e:
        log.import_records(records, batch=2)
    assert (e.value.seq, e.value.imported, e.value.head) == (5, 4, 4)
    assert "4 record(s) were imported before it, up to seq 4" in str(e.value)
    assert records_of(log) == records_of(source)[:4]


def test_a_tampered_record_in_the_first_batch_writes_nothing(source, log):
    records = records_of(source)
    records[7] = records[7]._replace(meta_json=b'{"actor":"mallory"}')
    with pytest.raises(ImportRefusedError, match=r"seq 8: hash does not match.*nothing was imported"):
        log.import_records(records)
    assert log.head().seq == 0


def test_a_dry_run_checks_everything_and_writes_nothing(source, log):
    assert log.import_records(source.read_all(), batch=2, dry_run=True) == source.head()
    assert log.head().seq == 0
    records = records_of(source)
    records[8] = records[8]._replace(hash="0" * 64)
    with pytest.raises(ImportRefusedError, match="seq 9"):
        log.import_records(records, batch=2, dry_run=True)
    assert log.head().seq == 0


def test_a_gap_and_a_repeat_are_refused(source, log):
    records = records_of(source)
    with pytest.raises(ImportRefusedError, match=r"seq 4 is missing \(the next record is seq 5\)"):
        log.import_records(records[:3] + records[4:])
    with pytest.raises(ImportRefusedError, match="seq 2 comes again after seq 3"):
        log.import_records(records[:3] + records[1:2])


def test_verify_false_skips_only_the_hash_recomputation(source, log):
    records = records_of(source)
    records[2] = records[2]._replace(data={"edited": True})
    log.import_records(records, verify=False)
    assert log.verify().first_bad_seq == 3  # written as given; verify() finds it
    broken = records_of(source)
    with pytest.raises(ImportRefusedError, match="prev_hash"):
        open_log(":memory:").import_records([broken[0], broken[2]._replace(seq=2)], verify=False)


def test_a_forged_chain_must_still_keep_versions_times_and_event_ids(source, log):
    records = records_of(source)
    versions = forge([records[0], records[1], records[2], records[3]._replace(version=5)])
    with pytest.raises(
        ImportRefusedError, match=r"seq 4: stream 'task-a' is at version 1, the record is version 5"
    ):
        log.import_records(versions)
    earlier = forge([records[0], records[1]._replace(recorded_us=records[0].recorded_us - 1)])
    with pytest.raises(ImportRefusedError, match="seq 2: recorded_at is earlier"):
        log.import_records(earlier)
    twice = forge([records[0], records[1]._replace(event_id=records[0].event_id)])
    with pytest.raises(ImportRefusedError, match=r"seq 2: event_id .* appears twice \(also at seq 1\)"):
        log.import_records(twice)
    log.import_records(records[:2])
    stored = forge([records[2]._replace(event_id=records[0].event_id)], start=records[1])
    with pytest.raises(ImportRefusedError, match=r"seq 3: event_id .* is already stored \(at seq 1\)"):
        log.import_records(stored)
    assert log.head().seq == 2


def test_another_writer_between_batches_stops_the_import(source, log):
    def meddle(done: int) -> None:
        if done == 3:
            log.append("other-1", [NewEvent("Tested", {})], expect=NO_STREAM)

    with pytest.raises(ImportRefusedError, match=r"seq 4: another writer appended .* now at seq 4") as e:
        log.import_records(source.read_all(), batch=3, progress=meddle)
    assert e.value.imported == 3


def test_a_keyed_chain_does_not_verify_under_another_key(source, log_factory, clock):
    keyed = log_factory(clock=clock, hmac_key=b"k" * 32)
    with pytest.raises(ImportRefusedError, match="seq 1: hash does not match"):
        keyed.import_records(source.read_all())


def test_a_read_only_log_refuses_an_import(source, tmp_path):
    path = tmp_path / "ro.db"
    open_log(path).close()
    with open_log(path, readonly=True) as ro, pytest.raises(ReadOnlyDatabaseError):
        ro.import_records(source.read_all())
