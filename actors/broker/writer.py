"""The broker's one write path: run writes decided on known states, group-committed by one thread.

Every command on a run is a `HotCall`: a report, finish, reply, heartbeat, registration,
control push or delivery made over HTTP (answered by a callback), and every command of the
Python API and the CLI (`RunWriter.call`, which blocks on the same call). One writer thread
takes every call waiting, decides each on the run's known state (`known.KnownRuns`, folding
the stream when it has none), and appends them all with `EventLog.append_many` — one
transaction, one commit — each with `expect=` the version it was decided on. A call whose
append meets another writer's (another process's: ConcurrencyError) is decided again on the
folded stream. An HTTP caller hears its answer once its commit returned, by a callback: no
thread waits for it, and no thread is started per run.

A run has at most one call in each transaction; its later calls wait for the next one, in
the order they came.
"""

from __future__ import annotations

import hmac
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from eventlog import NO_STREAM, Clock, ConcurrencyError, EventLog, Record

from .._aggregate import MAX_ATTEMPTS, folded
from .._errors import ContentionError
from .known import Known, KnownRuns
from .model import ControlMessage
from .parking import Parked, Parking
from .run_decider import QueueControl, RunState, TakeControl, decide, evolve

# (state decided on, state after, records) -> the call's answer.
Reply = Callable[[RunState, RunState, list[Record]], Any]
# The answer of a call whose token is not the run's.
REFUSED = (False, None)


class HotCall:
    """One write on its way; `done()` is called once, when `result()` has its answer.

    With `token_sha256` (a digest), the call is made as the run: its answer is `(True,
    reply(...))` if the token is the run's, else REFUSED. Without it, the answer is
    `reply(...)`; the decider's refusal (a run not found, a full queue) is raised by `result()`.
    """

    __slots__ = (
        "_done", "_error", "_value", "actor", "attempts", "command", "handed", "parked", "reply", "run_id",
        "token_sha256",
    )  # fmt: skip

    def __init__(
        self,
        run_id: str,
        token_sha256: str | None,
        command: object,
        reply: Reply,
        done: Callable[[], object],
        actor: str = "",
    ) -> None:
        self.run_id = run_id
        self.actor = actor or f"run:{run_id}"  # who the records' meta names
        self.token_sha256 = token_sha256
        self.command = command
        self.reply = reply
        self._done: Callable[[], object] | None = done
        self.attempts = 0
        self.parked: Parked | None = None  # a waiting poll this push delivers to, in the same commit
        self.handed: list[ControlMessage] = []  # what that poll is handed once committed
        self._value: Any = None
        self._error: BaseException | None = None

    def settle(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value, self._error = value, error

    def done(self) -> None:
        """Tell the caller its answer is in (once; later calls do nothing)."""
        done, self._done = self._done, None
        if done is not None:
            done()

    def result(self) -> Any:
        """The answer; call it once `done` was called. Raises what the write raised."""
        if self._error is not None:
            raise self._error
        return self._value


class Ready:
    """An answer known at once: `done()` is called right away."""

    __slots__ = ("_value",)

    def __init__(self, value: Any, done: Callable[[], object]) -> None:
        self._value = value
        done()

    def result(self) -> Any:
        return self._value


class RunWriter:
    """The writer thread (see the module); it starts with the first call and stops at `close()`.

    `on_written(run_id, records)` is called on the writer's thread after each commit of a run;
    `admit(run_id, command)` before deciding a call made as the run (a poll's take excepted),
    once: what it raises is the call's answer.
    """

    # How long a transaction waits at most for the callers of the last one (see _gather).
    GATHER_SECONDS = 0.0005

    def __init__(
        self,
        log: EventLog,
        clock: Clock,
        known: KnownRuns,
        on_written: Callable[[str, list[Record]], object],
        parking: Parking | None = None,
        admit: Callable[[str, object], object] | None = None,
    ) -> None:
        self.log = log
        # Checks a run's own write (its fields, its rate) once its token is known good.
        self.admit = admit
        self.parking = parking
        self.clock = clock
        self.known = known
        self.on_written = on_written
        self._cond = threading.Condition(threading.Lock())
        self._pending: deque[HotCall] = deque()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._awaited = 0  # while the writer waits: how many pending calls wake it (0: it is busy)
        self._last = 0  # how many calls the last transaction took (only the writer's thread)

    def submit(self, call: HotCall) -> HotCall:
        with self._cond:
            if self._closed:
                raise RuntimeError("the broker is closed")
            self._pending.append(call)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="flightlog-run-writer", daemon=True)
                self._thread.start()
            if 0 < self._awaited <= len(self._pending):
                self._cond.notify()
        return call

    def call(self, run_id: str, command: object, reply: Reply, *, actor: str = "") -> Any:
        """Submit `command` of `run_id` and wait until it is decided and committed: the way in of
        the Python API and the CLI, the same path as the HTTP server's. Returns `reply(...)`'s
        answer, or raises the decider's refusal or the log's error."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("the run writer's own thread cannot wait for a write")
        answered = threading.Event()
        call = self.submit(HotCall(run_id, None, command, reply, answered.set, actor))
        answered.wait()
        return call.result()

    def close(self) -> None:
        """Finish the calls already submitted, then stop the thread."""
        with self._cond:
            self._closed = True
            thread = self._thread
            self._cond.notify()
        if thread is not None:
            thread.join()

    # -- the thread ----------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self._cond:
                self._gather()
                if not self._pending:
                    return
                calls, self._pending = self._pending, deque()
            batch: list[HotCall] = []
            later: list[HotCall] = []
            runs: set[str] = set()
            for call in calls:
                (later if call.run_id in runs else batch).append(call)
                runs.add(call.run_id)
            self._last = len(batch)  # a run's later calls are not callers to wait for
            try:
                again = self._write(batch)
            except Exception as e:  # noqa: BLE001 - a bug: its callers hear it, the writer goes on
                for call in batch:
                    if call.parked is not None:
                        self._release(call)
                    call.settle(error=e)
                    call.done()
                again = []
            if again or later:
                with self._cond:
                    self._pending.extendleft(reversed(again + later))

    def _gather(self) -> None:
        """Wait for calls (call with `_cond` held): for one at all, then, for at most
        GATHER_SECONDS, for as many as the last transaction wrote runs.

        The callers of the last transaction were answered together and are sending their next
        calls, one after another as the event loop reads them: taken as soon as the first came,
        16 agents' transactions held 9 calls on average (from 1 to 16), and a commit costs
        about as much CPU as ten rows. One caller alone never waits (the last transaction
        wrote one run).
        """
        try:
            while not self._pending and not self._closed:
                self._awaited = 1
                self._cond.wait()
            want = self._last
            if len(self._pending) < want and not self._closed:
                self._awaited = want
                self._cond.wait_for(lambda: len(self._pending) >= want or self._closed, self.GATHER_SECONDS)
        finally:
            self._awaited = 0

    def _write(self, batch: list[HotCall]) -> list[HotCall]:
        """Decide and append `batch` in one commit, settle what is answered; return what to retry."""
        answered: list[HotCall] = []
        planned: list[tuple[HotCall, Known, list[Any], Exception | None]] = []
        now = self.clock.now()
        for call in batch:
            try:
                plan = self._decide(call, now)
            except Exception as e:  # noqa: BLE001 - the caller hears it from result()
                call.settle(error=e)
                plan = None
            if plan is None:
                answered.append(call)
            else:
                planned.append((call, *plan))
        if planned:
            appends = []
            for call, known, events, _ in planned:
                # Events with the append's meta: stored as encode(e, meta=...) stores them.
                meta = {"actor": call.actor}
                appends.append((f"run-{call.run_id}", events, known.version or NO_STREAM, meta))
                self.known.writing(call.run_id, known.version + len(events))
            try:
                outcomes: list[Any] = list(self.log.append_many(appends))
            except Exception as e:  # noqa: BLE001 - every caller hears it from result()
                outcomes = [e] * len(planned)
            again = []
            for (call, known, events, error), outcome in zip(planned, outcomes, strict=True):
                self.known.writing(call.run_id, None)
                if call.parked is not None and not isinstance(outcome, list):
                    self._release(call)
                if isinstance(outcome, ConcurrencyError) and call.attempts < MAX_ATTEMPTS:
                    # Another writer was first: decide again on the log's state, and wake the
                    # run's waiters for what it wrote (the follower, taking that commit for
                    # this one's, may have told them before this state was folded).
                    self._fold(call.run_id, known, wake=True)
                    again.append(call)
                    continue
                if isinstance(outcome, ConcurrencyError):
                    call.settle(error=ContentionError(f"run-{call.run_id}", MAX_ATTEMPTS))
                elif isinstance(outcome, BaseException):
                    call.settle(error=outcome)
                else:
                    self._committed(call, known, events, outcome, error, now)
                answered.append(call)
        else:
            again = []
        for call in answered:
            call.done()
        return again

    def _decide(self, call: HotCall, now: Any) -> tuple[Known, list[Any], Exception | None] | None:
        """(known state, events, the decider's error) to append, or None once settled."""
        call.attempts += 1
        known = self.known.get(call.run_id)
        if known is None or not known.fresh:
            known = self._fold(call.run_id, known)
        state = known.state
        if call.token_sha256 is not None and not (
            state.exists and hmac.compare_digest(call.token_sha256, state.token_sha256)
        ):
            call.settle(REFUSED)
            return None
        admitted = call.token_sha256 is None or call.attempts > 1 or isinstance(call.command, TakeControl)
        if not admitted and self.admit is not None:
            self.admit(call.run_id, call.command)
        decision = decide(state, call.command, now)
        if isinstance(call.command, QueueControl) and decision.events and decision.error is None:
            return known, self._hand_over(call, state, list(decision.events), now), None
        if not decision.events:
            if decision.error is not None:
                call.settle(error=decision.error)
            else:
                self._answer(call, state, state, [])
            return None
        return known, list(decision.events), decision.error

    def _committed(
        self,
        call: HotCall,
        known: Known,
        events: list[Any],
        records: list[Record],
        error: Exception | None,
        now: Any,
    ) -> None:
        state = known.state
        for event in events:
            state = evolve(state, event)
        self.known.publish(call.run_id, state, records[-1].version, now)
        if call.parked is not None:
            assert self.parking is not None
            self.parking.deliver(call.parked, call.handed)
            call.parked = None
        try:
            self.on_written(call.run_id, records)
        finally:
            if error is not None:
                call.settle(error=error)
            else:
                self._answer(call, known.state, state, records)

    def _hand_over(self, call: HotCall, state: RunState, queued: list[Any], now: Any) -> list[Any]:
        """The events of a push: delivered too, in the same append, when a poll waits on the run."""
        parked = self.parking.claim(call.run_id, state.token_sha256) if self.parking is not None else None
        if parked is None:
            return queued
        for event in queued:
            state = evolve(state, event)
        call.parked, call.handed = parked, list(state.queue)
        return [*queued, *decide(state, TakeControl(), now).events]

    def _release(self, call: HotCall) -> None:
        assert self.parking is not None
        assert call.parked is not None
        self.parking.release(call.parked)
        call.parked = None

    @staticmethod
    def _answer(call: HotCall, before: RunState, after: RunState, records: list[Record]) -> None:
        try:
            value = call.reply(before, after, records)
        except Exception as e:  # noqa: BLE001 - the caller hears it from result()
            call.settle(error=e)
            return
        call.settle((True, value) if call.token_sha256 is not None else value)

    def _fold(self, run_id: str, known: Known | None, wake: bool = False) -> Known:
        """The run's state folded from `known` (or from nothing) to the log's last version.

        With `wake`, `on_written` is told of the records folded, as of a commit of its own.
        """
        state = known.state if known is not None else RunState(run_id)
        version = known.version if known is not None else 0
        records = list(self.log.read(f"run-{run_id}", from_version=version + 1))
        for record in records:
            state = folded(state, record, evolve)
            version = record.version
        fresh = Known(state, version)
        self.known.publish(run_id, state, version, self.clock.now())
        if wake and records:
            self.on_written(run_id, records)
        return fresh


# -- the answers a call may give (a `Reply`) ------------------------------------------------


def nothing(before: RunState, after: RunState, records: list[Record]) -> None:
    return None


def state_after(before: RunState, after: RunState, records: list[Record]) -> tuple[RunState, list[Record]]:
    """The run's state after the command, and what it recorded (the Python API's answer)."""
    return after, records


def queued_message(before: RunState, after: RunState, records: list[Record]) -> ControlMessage | None:
    """A push's answer: the message as queued (its created_at set), even when a waiting poll took
    it in the same append."""
    return folded(before, records[0], evolve).queue[-1] if records else None


def taken_queue(before: RunState, after: RunState, records: list[Record]) -> list[ControlMessage]:
    """A delivery's answer: decided on `before`, the whole of its queue (none if nothing was written)."""
    return list(before.queue) if records else []
