"""The broker's writer gathers the callers of its last transaction before the next commit."""

from __future__ import annotations

import threading
from typing import Any

from actors import Broker
from actors.broker.model import Report

from .conftest import WAIT


class _HeldLog:
    """The writer's log, whose commits each wait until the test lets them go."""

    def __init__(self, log: Any) -> None:
        self._log = log
        self.groups: list[list[str]] = []  # the streams of each transaction, in order
        self.entered = threading.Semaphore(0)
        self.go = threading.Semaphore(0)

    def append_many(self, appends: Any) -> Any:
        self.groups.append([a[0] for a in appends])
        self.entered.release()
        assert self.go.acquire(timeout=WAIT), "the test never let the commit go"
        return self._log.append_many(appends)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)


def _report(broker: Broker, run_id: str, token: str, answered: threading.Semaphore) -> None:
    broker.call_as_run(run_id, token, Report(run_id, "working", '{"n":1}'), answered.release)


def test_the_next_transaction_waits_for_as_many_calls_as_the_last_one_took(broker: Broker):
    tokens = {f"r{i}": broker.register(f"r{i}") for i in range(7)}
    writer = broker._writer
    held = writer.log = _HeldLog(writer.log)
    writer.GATHER_SECONDS = WAIT  # only the calls end a gather here, never the time
    answered = threading.Semaphore(0)

    _report(broker, "r0", tokens["r0"], answered)  # alone: written at once
    assert held.entered.acquire(timeout=WAIT)
    for run_id in ("r1", "r2", "r3"):  # queued while r0's commit is under way
        _report(broker, run_id, tokens[run_id], answered)
    held.go.release()
    assert held.entered.acquire(timeout=WAIT)  # the three, in one transaction
    for run_id in ("r4", "r5"):
        _report(broker, run_id, tokens[run_id], answered)
    held.go.release()
    # The last transaction took three calls: two are not enough for the next one...
    assert not held.entered.acquire(timeout=0.05)
    _report(broker, "r6", tokens["r6"], answered)
    assert held.entered.acquire(timeout=WAIT)  # ...the third is
    held.go.release()
    for _ in range(7):
        assert answered.acquire(timeout=WAIT)
    assert held.groups == [["run-r0"], ["run-r1", "run-r2", "run-r3"], ["run-r4", "run-r5", "run-r6"]]


def test_closing_ends_a_gather_and_writes_what_came(broker: Broker):
    tokens = {f"r{i}": broker.register(f"r{i}") for i in range(4)}
    writer = broker._writer
    held = writer.log = _HeldLog(writer.log)
    writer.GATHER_SECONDS = WAIT
    answered = threading.Semaphore(0)

    _report(broker, "r0", tokens["r0"], answered)
    assert held.entered.acquire(timeout=WAIT)
    for run_id in ("r1", "r2"):
        _report(broker, run_id, tokens[run_id], answered)
    held.go.release()
    assert held.entered.acquire(timeout=WAIT)  # r1 and r2: the next gather waits for two
    _report(broker, "r3", tokens["r3"], answered)
    held.go.release()
    closing = threading.Thread(target=writer.close)
    closing.start()
    assert held.entered.acquire(timeout=WAIT)  # r3 alone, once the writer is closing
    held.go.release()
    closing.join(WAIT)
    assert not closing.is_alive()
    for _ in range(4):
        assert answered.acquire(timeout=WAIT)
    assert held.groups == [["run-r0"], ["run-r1", "run-r2"], ["run-r3"]]


def test_a_runs_later_call_is_not_a_caller_to_wait_for(broker: Broker):
    tokens = {f"r{i}": broker.register(f"r{i}") for i in range(2)}
    writer = broker._writer
    held = writer.log = _HeldLog(writer.log)
    writer.GATHER_SECONDS = 3 * WAIT  # a gather would outlast every wait below
    answered = threading.Semaphore(0)

    _report(broker, "r0", tokens["r0"], answered)
    assert held.entered.acquire(timeout=WAIT)
    _report(broker, "r1", tokens["r1"], answered)
    _report(broker, "r1", tokens["r1"], answered)  # one transaction holds one call of a run
    held.go.release()
    assert held.entered.acquire(timeout=WAIT)  # r1's first call
    held.go.release()
    assert held.entered.acquire(timeout=WAIT)  # its second, at once: nobody else was waited for
    held.go.release()
    for _ in range(3):
        assert answered.acquire(timeout=WAIT)
    assert held.groups == [["run-r0"], ["run-r1"], ["run-r1"]]
