"""The broker's non-blocking calls: the HTTP server's way in to the run writer (`writer`).

Each starts a call and calls `done()` once its answer is in — from the writer's thread, or at
once when the known state already answers it — the answer being the call's `result()`. None
starts an actor or a thread for the run.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from .._broker_errors import BrokerError, RunNotFoundError
from .known import KnownRuns
from .model import ORIGIN_SELF, ControlMessage, Finish, Reply, Report, token_digest
from .parking import Parked, Parking
from .run_decider import (
    Heartbeat,
    QueueControl,
    RecordFinish,
    RecordReply,
    RecordReport,
    RegisterRun,
    TakeControl,
)
from .writer import REFUSED, HotCall, Ready, RunWriter, nothing, taken_queue

# The seed takes any run id; a stream name holds at most 512 characters, "run-" included, so
# a longer id names no run (and can register none).
MAX_RUN_ID_LENGTH = 512 - len("run-")


class HotPath:
    """The broker's non-blocking calls, on its writer, its known states and its parked polls.

    `admits(run_id, catch_up=)` says whether the run exists as this process knows it;
    `queue_bound(message)` is the command that queues a message within the broker's bounds.
    """

    def __init__(
        self,
        writer: RunWriter,
        known: KnownRuns,
        parking: Parking,
        admits: Callable[..., bool],
        queue_bound: Callable[[ControlMessage], QueueControl],
    ) -> None:
        self._writer = writer
        self._known = known
        self._parking = parking
        self.admits = admits
        self.queue_bound = queue_bound

    def call_as_run(
        self, run_id: str, token: str, write: Report | Finish | Reply | None, done: Callable[[], object]
    ) -> Pending:
        """Start a write of `run_id` checked against its `token` (None: a heartbeat), without blocking.

        The token check and the write are one step of the run's writes: no other command of
        the run comes between them. `done()` is called once the answer is in; the call's
        result is then `(authorized, _)`, authorized only if the write was recorded (committed).
        """
        if isinstance(write, Report):
            command: object = RecordReport(write.state, write.payload)
        elif isinstance(write, Finish):
            command = RecordFinish(write.status, write.summary, write.files_changed, write.payload)
        elif isinstance(write, Reply):
            command = RecordReply(write.to, write.payload)
        else:
            command = Heartbeat()
        if not token or not self.admits(run_id, catch_up=False):
            return Ready(REFUSED, done)
        return self._writer.submit(HotCall(run_id, token_digest(token), command, nothing, done))

    def call_take_as_run(self, run_id: str, token: str, done: Callable[[], object]) -> Pending:
        """Start draining `run_id`'s queue checked against its `token`, without blocking.

        As `call_as_run`: the result is `(authorized, messages taken)`, oldest first. A run
        whose known state has an empty queue is answered at once, with nothing written.
        """
        if not token or not self.admits(run_id, catch_up=False):
            return Ready(REFUSED, done)
        digest = token_digest(token)
        known = self._known.get(run_id)
        if known is not None and known.fresh and known.state.exists and not known.state.queue:
            ok = hmac.compare_digest(digest, known.state.token_sha256)
            return Ready((True, []) if ok else REFUSED, done)
        return self._writer.submit(HotCall(run_id, digest, TakeControl(), taken_queue, done))

    def queue_control(self, run_id: str, message: ControlMessage, done: Callable[[], object]) -> Pending:
        """`push_control` without blocking: `done()` once committed (the result is None).

        RunNotFoundError (a run this process does not know yet: see `Broker.admits`) and
        ControlQueueFullError are raised by `result()`.
        """
        if not self.admits(run_id, catch_up=False):
            return _Failed(RunNotFoundError(run_id), done)
        return self._writer.submit(HotCall(run_id, None, self.queue_bound(message), nothing, done))

    def register_soon(
        self,
        run_id: str,
        token: str,
        done: Callable[[], object],
        *,
        origin: str = ORIGIN_SELF,
        by: str = "",
        create: bool = True,
    ) -> Pending:
        """HTTP /register without blocking (see `Broker.register`): one append, no actor.

        A new run is recorded as created by `origin` and `by` (the client's address, for a
        run registering itself); without `create` only an existing run registers again. The
        result is None; RunAlreadyRegisteredError (RunRevokedError), RunNotEnrolledError or
        BrokerError are raised by `result()`.
        """
        error = registration_error(run_id)
        if error is not None:
            return _Failed(error, done)
        command = RegisterRun(token_digest(token), True, True, origin, by, "", create)
        return self._writer.submit(HotCall(run_id, None, command, nothing, done))

    def park(self, run_id: str, wake: Callable[[], object], token: str) -> Parked:
        """A long poll with `token` waits on the run's empty queue: a push may hand it its message
        in one commit, while `token` is still the run's.

        `wake()` is called when that happens, and when the run's token changes (the poll then
        shows its token again); call `leave` when the poll stops waiting.
        """
        return self._parking.park(run_id, wake, token_digest(token))

    def leave(self, parked: Parked, done: Callable[[], object]) -> Parked:
        """The poll stops waiting; `done()` once settled, the result being the messages handed to it."""
        return self._parking.leave(parked, done)


MAX_REGISTERED_RUN_ID = 200  # what /register takes: a run id is shown in tables, terminals and the console


def registration_error(run_id: str) -> BrokerError | None:
    """Why /register refuses `run_id`, or None: 1 to MAX_REGISTERED_RUN_ID printable characters."""
    if not run_id:
        return BrokerError("missing run_id")
    if len(run_id) > MAX_REGISTERED_RUN_ID or not run_id.isprintable():
        return BrokerError(
            f"invalid run_id: 1 to {MAX_REGISTERED_RUN_ID} printable characters, no control characters"
        )
    return None


class _Failed:
    """An error known at once: `done()` is called right away, `result()` raises it."""

    __slots__ = ("_error",)

    def __init__(self, error: Exception, done: Callable[[], object]) -> None:
        self._error = error
        done()

    def result(self) -> Any:
        raise self._error


# What a non-blocking call returns: `result()` once its `done()` was called.
Pending = HotCall | Ready | _Failed
