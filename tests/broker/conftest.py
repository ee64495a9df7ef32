"""Fixtures for the broker's tests: a System per backend, and waits that never sleep."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from actors import Broker, System
from eventlog import EventLog, ManualClock

WAIT = 10.0  # seconds any single wait may take before the test fails (never a sleep)


@pytest.fixture
def system(log_factory: Callable[..., EventLog], clock: ManualClock) -> Iterator[System]:
    s = System.open(log_factory(clock=clock), clock=clock, scheduler=False)
    yield s
    s.close()


@pytest.fixture
def broker(system: System) -> Broker:
    return system.broker


def queued_signal(broker: Broker, run_id: str) -> tuple[threading.Event, Callable[[], None]]:
    """An event set whenever a control message is queued for the run (here or by another writer)."""
    signal = threading.Event()
    unsubscribe = broker.on_control(run_id, signal.set)
    return signal, unsubscribe


def take_eventually(broker: Broker, run_id: str, count: int) -> list:
    """Take from the run's queue until `count` messages came, waiting on the queue's signal."""
    taken: list = []
    signal, unsubscribe = queued_signal(broker, run_id)
    try:
        while len(taken) < count:
            signal.clear()
            got = broker.take_control(run_id)
            taken.extend(got)
            if not got and len(taken) < count:
                assert signal.wait(WAIT), f"only {len(taken)} of {count} messages arrived"
    finally:
        unsubscribe()
    return taken
