"""Listeners of a run's control queue (`Broker.on_control`) that misbehave.

A listener is called on the run writer's thread right after a commit, and on the log
follower's thread for what another process wrote. One that fails there, or that tries to
write (the writer's own thread cannot wait for a write), must not make a committed write look
failed to its caller, nor stop the follower.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from actors import ControlMessage, System

from .conftest import WAIT


class Logged(logging.Handler):
    """The broker's log records, and an event set by each (its failures are logged after the fact)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []
        self.came = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.came.set()


@pytest.fixture
def logged() -> Iterator[Logged]:
    handler = Logged()
    logger = logging.getLogger("flightlog.broker")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def steer(run_id: str, text: str) -> ControlMessage:
    return ControlMessage(text, "steer", run_id, "", b'{"text": "%s"}' % text.encode())


def test_a_listener_that_writes_or_fails_leaves_a_committed_push_answered(tmp_path, logged):
    with System.open(str(tmp_path / "log.db"), scheduler=False) as system:
        broker = system.broker
        broker.create_run("a")
        heard = threading.Event()
        broker.on_control("a", lambda: broker.take_control("a"))  # a write, on the writer's thread
        broker.on_control("a", lambda: 1 / 0)
        broker.on_control("a", heard.set)

        queued = broker.push_control("a", steer("a", "m1"))

        assert queued is not None
        assert queued.id == "m1"
        assert heard.is_set()  # the listeners after a failing one are called all the same
        assert "ControlQueued" in [r.type for r in system.log.read("run-a")]
        assert logged.came.is_set(), (
            "a listener's failure is logged (on the writer's thread, before the answer)"
        )
        again = broker.push_control("a", steer("a", "m2"))  # the writer goes on
        assert again is not None
        assert again.id == "m2"


def test_a_failing_listener_leaves_the_follower_following(tmp_path, logged):
    path = str(tmp_path / "log.db")
    with System.open(path, scheduler=False) as here, System.open(path, scheduler=False) as there:
        there.broker.create_run("b")
        there.broker.create_run("c")
        failed = threading.Event()

        def fails() -> None:
            failed.set()
            raise RuntimeError("a listener's bug")

        here.broker.on_control("b", fails)
        there.broker.push_control("b", steer("b", "m1"))  # another process's write: the follower's
        assert failed.wait(WAIT), "the follower never called the listener"
        assert logged.came.wait(WAIT)
        # The follower still follows: a push by the other process wakes a poll waiting here.
        polled: list[list[ControlMessage]] = []
        poll = threading.Thread(target=lambda: polled.append(here.broker.wait_control("c", WAIT)))
        woken = threading.Event()
        here.broker.on_control("c", woken.set)
        poll.start()
        there.broker.push_control("c", steer("c", "m2"))
        assert woken.wait(WAIT), "the follower stopped after a listener failed"
        poll.join(WAIT)
        assert not poll.is_alive()
        assert [m.id for batch in polled for m in batch] == ["m2"]


@pytest.mark.parametrize("thread", ["writer", "follower"])
def test_what_a_listener_raises_is_logged_with_its_run(tmp_path, logged, thread):
    path = str(tmp_path / "log.db")
    with System.open(path, scheduler=False) as here, System.open(path, scheduler=False) as there:
        writer = here if thread == "writer" else there
        writer.broker.create_run("d")
        done = threading.Event()

        def fails() -> None:
            done.set()
            raise ValueError("boom")  # after `done`: the test waits for the log record, not for this

        here.broker.on_control("d", fails)
        writer.broker.push_control("d", steer("d", "m1"))
        assert done.wait(WAIT)
        assert logged.came.wait(WAIT)
        record = logged.records[0]
        assert "run d" in record.getMessage()
        assert record.exc_info is not None
        assert isinstance(record.exc_info[1], ValueError)
