"""Turns: runs a session's conversation turns through a harness and records every event they publish.

Each turn runs in its own thread, one at a time per session: it records `TurnStarted`, sends
the prompt to the harness with the turn id as the run id, and waits until the harness
publishes a terminal event (`session.idle`, `session.error`, `session.shutdown`). Every
event published for a live turn is recorded in the session's stream first, then handed to
the turn's stream and to the session's subscribers.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeGuard, cast

from eventlog import Clock, Record

from .._aggregate import Execute
from .._directory import Directory
from .._errors import HarnessError, SessionError
from ..approvals import ApprovalQueue, ApprovalRequest
from ..harnesses import COMPACTION, IMMEDIATE, PERMISSION_REQUEST, Harness, HarnessEvent
from .decider import (
    TURN_FAILED,
    TURN_INTERRUPTED,
    FinishTurn,
    RecordTurnEvent,
    SessionCommand,
    SessionInfo,
    StartTurn,
)
from .keys import new_session_id
from .stream import EventStream, error_event

JOIN_TIMEOUT = 10.0  # how long close() waits for one turn's thread


@dataclass(frozen=True, slots=True)
class HarnessRequest:
    """What a harness factory is asked for: the session, and the per-run options of one turn.

    A turn with per-run options gets a fresh harness, closed when the turn ends, so those
    options never leak into later turns on the same session.
    """

    session: SessionInfo
    extra_tools: tuple[str, ...] = ()
    excluded_tools: tuple[str, ...] = ()
    system_prompt: str = ""


HarnessFactory = Callable[[HarnessRequest], Harness]
HarnessSource = Harness | HarnessFactory


@dataclass(frozen=True, slots=True)
class TurnSpec:
    """One turn to run: the resolved session, the entry point, the prompt and per-run options."""

    session: SessionInfo
    entry: str
    prompt: str
    extra_tools: tuple[str, ...] = ()
    excluded_tools: tuple[str, ...] = ()
    system_prompt: str = ""

    @property
    def per_run(self) -> bool:
        return bool(self.extra_tools or self.excluded_tools or self.system_prompt)


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How a turn ended: its status, last assistant output, error, and any compaction summary."""

    turn_id: str
    status: str
    output: str = ""
    error: str = ""
    summary: str = ""


class Turn:
    """A turn in flight; `finished` is set once it has ended and `result` says how."""

    def __init__(self, spec: TurnSpec, turn_id: str) -> None:
        self.spec = spec
        self.id = turn_id
        self.stream = EventStream(spec.session.id, turn_id)
        self.done = threading.Event()  # terminal event recorded, or the service is closing
        self.finished = threading.Event()
        self.result: TurnResult | None = None
        self.summary = ""
        self.harness: Harness | None = None

    def wait(self, timeout: float | None = None) -> TurnResult:
        """Block until the turn has ended; return its result (TimeoutError after `timeout`)."""
        if not self.finished.wait(timeout):
            raise TimeoutError(f"turn {self.id} still running after {timeout} s")
        if self.result is not None:
            return self.result
        return TurnResult(self.id, TURN_FAILED, error=f"start turn: {self.stream.error}")


class Turns:
    """The turns of every session in this process: threads, harnesses, subscribers, in-flight count."""

    def __init__(
        self,
        actors: Directory,
        clock: Clock,
        source: HarnessSource | None = None,
        approvals: ApprovalQueue | None = None,
    ) -> None:
        self._actors = actors
        self._clock = clock
        self.source = source
        self._approvals = approvals
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()  # harness starts may publish: never under _lock
        self._session_locks: dict[str, tuple[threading.Lock, int]] = {}  # lock, turns using it
        self._live: dict[str, Turn] = {}  # by turn id: events for these are recorded
        self._turns: dict[str, Turn] = {}  # every turn not finished yet
        self._threads: dict[str, threading.Thread] = {}
        self._subs: dict[str, list[EventStream]] = {}
        self._shared_started = False
        self._cached: dict[str, Harness] = {}
        self._idle = threading.Condition(self._lock)
        self._closing = threading.Event()

    # -- running turns ---------------------------------------------------------------------

    def begin(self, spec: TurnSpec) -> Turn:
        """Start a turn in its own thread; its events arrive on `turn.stream`."""
        turn = Turn(spec, new_session_id(self._clock))
        if self._closing.is_set():
            self._fail_early(turn, SessionError("the sessions service is closed"))
            return turn
        thread = threading.Thread(target=self._run, args=(turn,), name=f"session-turn-{turn.id[-8:]}")
        thread.daemon = True
        with self._lock:
            self._turns[turn.id] = turn
            self._threads[turn.id] = thread
        thread.start()
        return turn

    def _run(self, turn: Turn) -> None:
        spec = turn.spec
        fresh = False
        try:
            with self._one_at_a_time(spec.session.id):
                if self._closing.is_set():
                    raise SessionError("the sessions service is closed")
                start = StartTurn(
                    turn.id,
                    spec.entry,
                    spec.prompt,
                    spec.extra_tools,
                    spec.excluded_tools,
                    spec.system_prompt,
                )
                self._execute(turn, start)
                try:
                    turn.harness, fresh = self._harness_for(spec)
                except Exception as e:  # noqa: BLE001 - recorded as the turn's failure
                    self._finish(turn, TURN_FAILED, f"start harness: {e}")
                    return
                with self._lock:
                    self._live[turn.id] = turn
                try:
                    turn.harness.send(turn.id, spec.prompt, IMMEDIATE)
                except Exception as e:  # noqa: BLE001 - recorded as the turn's failure
                    self._finish(turn, TURN_FAILED, f"sending prompt: {e}")
                    return
                turn.done.wait()
                if turn.result is None:
                    self._finish(turn, TURN_INTERRUPTED, "the sessions service closed during the turn")
        except Exception as e:  # noqa: BLE001 - the stream carries it as its error event
            turn.stream.error = e
            self._deliver(turn, error_event(f"start turn: {e}", turn.id))
        finally:
            with self._lock:
                self._live.pop(turn.id, None)
            if fresh and turn.harness is not None:
                _close_quietly(turn.harness)
            self._end(turn)

    def _fail_early(self, turn: Turn, error: Exception) -> None:
        turn.stream.error = error
        turn.stream.put(error_event(f"start turn: {error}", turn.id))
        turn.stream.end()
        turn.finished.set()

    def _end(self, turn: Turn) -> None:
        turn.stream.end()
        with self._lock:
            self._turns.pop(turn.id, None)
            self._threads.pop(turn.id, None)
            self._idle.notify_all()
        turn.finished.set()

    @contextlib.contextmanager
    def _one_at_a_time(self, session_id: str) -> Iterator[None]:
        """Hold the session's turn lock; it is forgotten when no turn of the session needs it."""
        with self._lock:
            lock, users = self._session_locks.get(session_id, (threading.Lock(), 0))
            self._session_locks[session_id] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._session_locks[session_id]
                if users == 1:
                    del self._session_locks[session_id]
                else:
                    self._session_locks[session_id] = (lock, users - 1)

    def _execute(self, turn: Turn, command: SessionCommand) -> list[Record]:
        meta = {"actor": "sessions", "correlation_id": turn.id}
        records: list[Record] = self._actors.ask(turn.spec.session.id, Execute(command, meta))[1]
        for record in records:
            if record.type == "TurnFinished" and record.data["turn_id"] == turn.id:
                d = record.data
                turn.result = TurnResult(turn.id, d["status"], d["output"], d["error"], turn.summary)
        return records

    def _finish(self, turn: Turn, status: str, error: str) -> None:
        self._execute(turn, FinishTurn(turn.id, status, error))
        if error:
            self._deliver(turn, error_event(error, turn.id))

    def _harness_for(self, spec: TurnSpec) -> tuple[Harness, bool]:
        source = self.source
        if source is None:
            raise HarnessError("no harness is configured for sessions")
        if _is_harness(source):
            with self._start_lock:
                if not self._shared_started:
                    source.start(self.publish)
                    self._shared_started = True
            return source, False
        factory = cast(HarnessFactory, source)
        if spec.per_run:
            request = HarnessRequest(spec.session, spec.extra_tools, spec.excluded_tools, spec.system_prompt)
            harness = factory(request)
            harness.start(self.publish)
            return harness, True
        with self._start_lock:
            cached = self._cached.get(spec.session.id)
            if cached is None:
                cached = factory(HarnessRequest(spec.session))
                cached.start(self.publish)
                self._cached[spec.session.id] = cached
        return cached, False

    # -- harness events --------------------------------------------------------------------

    def publish(self, event: HarnessEvent) -> object:
        """Record an event of a live turn; a permission request blocks until it is decided."""
        with self._lock:
            turn = self._live.get(event.run_id)
        if turn is None or turn.done.is_set():
            return None  # not a turn of ours, or one that already ended: nothing to record
        try:
            records = self._execute(turn, RecordTurnEvent(turn.id, event.type, event.id, dict(event.data)))
        except Exception as e:
            # Fail closed: an event that cannot be recorded ends the turn.
            turn.result = TurnResult(turn.id, TURN_FAILED, error=f"recording harness event: {e}")
            self._deliver(turn, error_event(turn.result.error, turn.id))
            turn.done.set()
            raise
        if not records:
            return None  # a duplicate id, or the turn ended meanwhile
        if event.type == COMPACTION and event.data.get("summary"):
            turn.summary = str(event.data["summary"])
        self._deliver(turn, event)
        if turn.result is not None:
            turn.done.set()
        if event.type == PERMISSION_REQUEST and self._approvals is not None:
            return self._permission(turn, event)
        return None

    def _permission(self, turn: Turn, event: HarnessEvent) -> Any:
        assert self._approvals is not None
        data = event.data
        request = ApprovalRequest(
            kind=str(data.get("kind") or "permission"),
            title=str(data.get("title") or f"Use {data.get('tool_name', 'a tool')}"),
            detail=str(data.get("detail") or data.get("tool_name") or "permission request"),
            risk=str(data.get("risk") or "high"),
            run_id=turn.id,
            tool_call_id=str(data.get("tool_call_id") or ""),
            payload=data.get("payload", data.get("arguments")),
        )
        requested_by = f"session:{turn.spec.session.id}"
        return self._approvals.request(request, cancel=self._closing, requested_by=requested_by)

    def _deliver(self, turn: Turn, event: HarnessEvent) -> None:
        turn.stream.put(event)
        with self._lock:
            subscribers = list(self._subs.get(turn.spec.session.id, ()))
        for stream in subscribers:
            stream.put(event)

    # -- watching --------------------------------------------------------------------------

    def subscribe(self, session_id: str) -> tuple[EventStream, Callable[[], None]]:
        stream = EventStream(session_id)
        with self._lock:
            if self._closing.is_set():
                stream.end()
            else:
                self._subs.setdefault(session_id, []).append(stream)

        def unsubscribe() -> None:
            with self._lock:
                subs = self._subs.get(session_id, [])
                if stream in subs:
                    subs.remove(stream)
                if not subs:
                    self._subs.pop(session_id, None)
            stream.end()

        return stream, unsubscribe

    def live(self, session_id: str) -> bool:
        with self._lock:
            return any(t.spec.session.id == session_id for t in self._turns.values())

    def wait_in_flight(self, timeout: float | None = None) -> None:
        with self._idle:
            if not self._idle.wait_for(lambda: not self._turns, timeout):
                raise TimeoutError(f"{len(self._turns)} turn(s) still in flight after {timeout} s")

    # -- closing ---------------------------------------------------------------------------

    def evict_idle(self) -> int:
        """Close the kept harnesses of sessions with no turn in flight; return how many."""
        with self._lock:
            busy = {t.spec.session.id for t in self._turns.values()}
        with self._start_lock:
            idle = [sid for sid in self._cached if sid not in busy]
            harnesses = [self._cached.pop(sid) for sid in idle]
        for harness in harnesses:
            _close_quietly(harness)
        return len(harnesses)

    def close(self) -> None:
        """Interrupt every turn, stop its harness, and end every stream."""
        self._closing.set()
        with self._lock:
            turns = list(self._turns.values())
            threads = list(self._threads.values())
        for turn in turns:
            turn.done.set()  # from now on their events are not recorded
        for turn in turns:
            if turn.harness is not None:
                with contextlib.suppress(Exception):
                    turn.harness.abort(turn.id)
        for thread in threads:
            thread.join(JOIN_TIMEOUT)
        with self._start_lock:
            harnesses = list(self._cached.values())
            self._cached.clear()
            if self._shared_started and self.source is not None and _is_harness(self.source):
                harnesses.append(self.source)
                self._shared_started = False
        for harness in harnesses:
            _close_quietly(harness)
        with self._lock:
            subs = [s for streams in self._subs.values() for s in streams]
            self._subs.clear()
        for stream in subs:
            stream.end()


def _is_harness(source: object) -> TypeGuard[Harness]:
    return all(callable(getattr(source, name, None)) for name in ("start", "send", "abort", "close"))


def _close_quietly(harness: Harness) -> None:
    with contextlib.suppress(Exception):
        harness.close()
