"""The group commit's wake-ups: the callers of a written group wake one after another, each
passing the wake-up on, and a caller that stops waiting (an interrupt) does not stop it."""

from __future__ import annotations

import linecache
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

import pytest

from eventlog import NewEvent, open_log
from eventlog._log import EventLog

WAIT = 30.0


class Interrupted(Exception):
    """Raised in the main thread by the test's SIGINT handler."""


@pytest.fixture
def interruptible() -> Iterator[None]:
    def raise_interrupted(signum: int, frame: FrameType | None) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGINT, raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def blocked_in_wait(ident: int) -> bool:
    """Whether thread `ident` is inside EventLog.append, waiting on its wake-up lock."""
    frame = sys._current_frames().get(ident)
    while frame is not None:
        if frame.f_code is EventLog._see_through.__code__:
            return "req.wake.acquire()" in linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return False


def wait_until(check, what: str) -> None:
    """Yield the GIL until `check()` holds; fail after WAIT seconds (no fixed sleeps)."""
    done = threading.Event()
    deadline = threading.Timer(WAIT, done.set)
    deadline.start()
    try:
        while not check():
            if done.is_set():
                pytest.fail(f"timed out waiting until {what}")
            threading.Event().wait(0)  # a bare yield, so the other threads run
    finally:
        deadline.cancel()


def test_every_caller_of_a_group_wakes_when_one_of_them_was_interrupted(tmp_path, interruptible):
    main = threading.get_ident()
    log = open_log(str(tmp_path / "log.db"))
    writes = 0
    taken = threading.Event()
    release = threading.Event()
    original = log._write_batch

    def held_write(batch):
        # The second group (B, this thread, C) is held open until this thread was interrupted.
        nonlocal writes
        writes += 1
        if writes == 2:
            taken.set()
            assert release.wait(WAIT)
        original(batch)

    first = threading.Event()

    def held_first(batch):
        if not first.is_set():
            first.set()
            assert release_first.wait(WAIT)
        held_write(batch)

    release_first = threading.Event()
    log._write_batch = held_first  # type: ignore[method-assign]
    results: dict[str, object] = {}

    def append(name: str) -> None:
        try:
            results[name] = log.append(f"s-{name}", [NewEvent("Noted", {"by": name})])
        except BaseException as e:
            results[name] = e

    a = threading.Thread(target=append, args=("a",))
    a.start()
    assert first.wait(WAIT)  # A leads and its write is held: later callers queue up
    b = threading.Thread(target=append, args=("b",))
    b.start()
    wait_until(lambda: len(log._queue) == 1, "B is queued")
    c = threading.Thread(target=append, args=("c",))

    def start_c_then_release_a() -> None:
        wait_until(lambda: len(log._queue) == 2 and blocked_in_wait(main), "this thread waits")
        c.start()
        wait_until(lambda: len(log._queue) == 3, "C is queued")
        release_first.set()  # A's group ends; B leads the group (B, this thread, C)
        assert taken.wait(WAIT)
        wait_until(lambda: blocked_in_wait(main), "this thread waits for its group")
        signal.pthread_kill(main, signal.SIGINT)

    helper = threading.Thread(target=start_c_then_release_a)
    helper.start()
    with pytest.raises(Interrupted):
        log.append("s-main", [NewEvent("Noted", {"by": "main"})])
    release.set()
    for t in (a, b, c, helper):
        t.join(WAIT)
        assert not t.is_alive(), "a caller of the group never woke"
    assert all(not isinstance(results[n], BaseException) for n in "abc"), results
    # The interrupted caller's event was written with its group: its outcome was unknown to
    # it, and re-appending the same event_id would return the stored record.
    assert [r.data["by"] for r in log.read_all()] == ["a", "b", "main", "c"]
    assert log.verify().ok
    log.close()


def test_sixteen_threads_each_hear_their_own_result(tmp_path):
    log = open_log(str(tmp_path / "log.db"))
    gate = threading.Barrier(16)
    seen: dict[int, list[int]] = {}

    def writer(n: int) -> None:
        gate.wait()
        got = []
        for i in range(25):
            [record] = log.append(f"t-{n}", [NewEvent("Noted", {"n": n, "i": i})], expect=i)
            assert record.data == {"n": n, "i": i}
            assert record.version == i + 1
            got.append(record.seq)
        seen[n] = got

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
    assert sorted(seen) == list(range(16))
    seqs = sorted(s for got in seen.values() for s in got)
    assert seqs == list(range(1, 16 * 25 + 1))
    assert log.verify().ok
    log.close()


def test_the_callers_of_a_written_group_are_gathered_into_the_next(tmp_path):
    """Eight threads appending in a loop: after the first group, every group holds all eight."""
    threads, rounds = 8, 12
    with open_log(str(tmp_path / "log.db")) as log:
        log.GATHER_SECONDS = 0.5  # type: ignore[misc]  # a wait on a condition, not a sleep
        sizes: list[int] = []
        write_batch = log._write_batch

        def recording(batch):  # type: ignore[no-untyped-def]
            sizes.append(len(batch))
            write_batch(batch)

        log._write_batch = recording  # type: ignore[method-assign]
        start = threading.Barrier(threads)

        def appender(t: int) -> None:
            start.wait()
            for n in range(rounds):
                log.append(f"run-{t}", [NewEvent("Noted", {"n": n})], expect=n)

        workers = [threading.Thread(target=appender, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(WAIT)
        assert not any(w.is_alive() for w in workers)
        assert sum(sizes) == threads * rounds
        # Without gathering: [1, 8, 1, 8, ...], twice the groups. The first caller is one
        # group ahead of the rest, so the last group waits out GATHER_SECONDS for it.
        assert len(sizes) <= rounds + 2, sizes
        assert log.verify().ok


def gathering(ident: int) -> bool:
    """Whether thread `ident` is inside EventLog._gather, waiting for callers to queue."""
    frame = sys._current_frames().get(ident)
    while frame is not None:
        if frame.f_code is EventLog._gather.__code__:
            return True
        frame = frame.f_back
    return False


def test_a_leader_interrupted_while_gathering_passes_the_lead_on(tmp_path, interruptible):
    main = threading.get_ident()
    log = open_log(str(tmp_path / "log.db"))
    log.GATHER_SECONDS = WAIT  # type: ignore[misc]
    log._appenders = 3  # as if three callers had appended around the last group

    def later() -> None:
        wait_until(lambda: gathering(main), "this thread gathers")
        signal.pthread_kill(main, signal.SIGINT)
        wait_until(lambda: not gathering(main), "this thread stopped gathering")
        log.GATHER_SECONDS = 0.0  # type: ignore[misc]  # this caller leads, not waiting for 3
        log.append("s-b", [NewEvent("Noted", {"by": "b"})])

    helper = threading.Thread(target=later, daemon=True)
    helper.start()
    with pytest.raises(Interrupted):
        log.append("s-main", [NewEvent("Noted", {"by": "main"})])
    helper.join(WAIT)
    # Not closed if the lead was kept: close() would wait for it forever.
    assert not helper.is_alive(), "the lead was never passed on"
    assert [r.data["by"] for r in log.read_all()] == ["b"]  # the interrupted append is not written
    assert log.verify().ok
    log.close()


def test_one_thread_appending_many_at_once_is_one_caller_and_never_waits_to_gather(tmp_path):
    """append_many's requests are one caller's: the groups after it gather for nobody."""
    log = open_log(tmp_path / "log.db")
    try:
        waits: list[object] = []
        cond_wait_for = log._cond.wait_for

        def counted(predicate, timeout=None):  # type: ignore[no-untyped-def]
            waits.append(timeout)
            return cond_wait_for(predicate, timeout)

        log._cond.wait_for = counted  # type: ignore[method-assign]
        for round_ in range(3):
            many = [(f"s-{round_}-{i}", [NewEvent("Noted", {"i": i})], 0) for i in range(8)]
            assert all(isinstance(r, list) for r in log.append_many(many))
            assert log._appenders == 1
            log.append(f"alone-{round_}", [NewEvent("Noted", {})])
        assert waits == []  # a lone caller never waited for others that do not exist
    finally:
        log.close()
