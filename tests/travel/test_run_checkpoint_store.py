"""Per-run checkpoints are kept by every backend's snapshot store, PostgreSQL's too, so that a
new process pages a long run from the checkpoints an earlier one made."""

from __future__ import annotations

from datetime import timedelta

from eventlog import ANY, RunCheckpointRow, snapshot_store
from eventlog.events import RunRegistered, RunReported
from projections import Views

RUN = "long"


def test_the_store_keeps_replaces_and_lists_run_checkpoints(log):
    store = snapshot_store(log)
    assert store.run_checkpoints("run-a") == []
    rows = [RunCheckpointRow("run-a", v, v * 10, f"h{v}", b'["working", 1, 0, []]', "") for v in (128, 64)]
    store.put_run_checkpoints([*rows, RunCheckpointRow("run-b", 64, 7, "hb", b"[]", "m")])
    assert [r.version for r in store.run_checkpoints("run-a")] == [64, 128]  # by version
    store.put_run_checkpoints([RunCheckpointRow("run-a", 64, 640, "h64", b'["done", 2, 0, []]', "mac")])
    first = store.run_checkpoints("run-a")[0]
    assert (first.data, first.mac) == (b'["done", 2, 0, []]', "mac")
    assert store.run_checkpoints("run-b") == [RunCheckpointRow("run-b", 64, 7, "hb", b"[]", "m")]


def test_a_new_reader_pages_a_long_run_from_the_checkpoints_another_made(log, clock, log_factory):
    log.append(f"run-{RUN}", [RunRegistered(RUN, "0" * 64, clock.now(), clock.now())], expect=ANY)
    for n in range(600):
        clock.advance(1)
        log.append(f"run-{RUN}", [RunReported(RUN, "working", f'{{"n": {n}}}', clock.now())], expect=ANY)
    first = Views(log)
    assert first.run_page(RUN, limit=5) is not None  # folds the run once, and stores its checkpoints
    assert len(snapshot_store(log).run_checkpoints(f"run-{RUN}")) == 601 // 64
    later = Views(log_factory(clock=clock))  # another reader of the same database
    middle = log.head().seq - 300
    page = later.run_page(RUN, at=middle, limit=5)
    assert page is not None
    assert page.total == 301  # its registration and the 300 reports up to `middle`
    # It read the distance from the checkpoint below `middle`, not the run up to it.
    assert later.pages.reads <= 64 + 5
    assert page.entries[-1].at == clock.now() - timedelta(seconds=300)
