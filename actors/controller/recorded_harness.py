"""RecordedHarness: serves a run's recorded harness events again, with no side effects.

It runs no program and no tool: it publishes what the origin's harness published after the
fork point, with the same ids and data, for the run it is handed. Permission requests go
through the controller's approval gate again and are decided by whoever re-drives the fork;
the origin's decision is never applied by the harness. Where the origin's reconcile gate
dispatched, it dispatches the same input through the fork's gate (`dispatch`, which
`System.fork_controller` binds to the controller, whose reconciler then serves the recorded
result). When the fork's decision or dispatch ends otherwise than the origin's, there is no
recorded result to serve: the turn ends with `session.error`. A fork at an approval names the
step whose decision it changes: once that step has its (other) outcome, a live harness
(`then`) goes on with the turn, handed the prompt and where it resumes (`HandedOver`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eventlog import EventLog
from projections import Views

from .._errors import HarnessError, NoRecordedResultError
from ..harnesses import (
    IMMEDIATE,
    JOIN_TIMEOUT,
    PERMISSION_REQUEST,
    SESSION_ERROR,
    SESSION_IDLE,
    TERMINAL,
    Harness,
    HarnessEvent,
    Publish,
)
from .fork import fork_origin
from .reconcile import DISPATCHED, FAILED
from .recording import DISPATCH, ERROR, RecordedStep, RecordedTurn, recorded_turn

Dispatch = Callable[[dict[str, Any], str], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class HandedOver:
    """Where a live harness picks up a fork's turn: after the changed step, decided so."""

    origin_run_id: str
    after: str  # the id of the permission request whose decision the fork changed
    tool_call_id: str
    decision: str

    def to_dict(self) -> dict[str, str]:
        return {
            "origin_run_id": self.origin_run_id,
            "after": self.after,
            "tool_call_id": self.tool_call_id,
            "decision": self.decision,
        }


class RecordedHarness:
    """Serves one recorded turn for the first run it is sent, and nothing else.

    `send` accepts only the origin's prompt, once: another prompt, a second run or a steer
    raises HarnessError (nothing was recorded for it). The turn plays in its own thread
    (inside `send` with `threaded=False`). A permission request blocks until decided; if it
    ends otherwise than the origin's did, the turn ends with `session.error` saying so. An
    abort stops the turn before its next step and publishes `session.idle`.

    A recorded dispatch calls `dispatch(input, tool_call_id)` (a controller's
    `reconcile_approved`); without one, or when the recording lacks the input dispatched,
    the turn ends with `session.error`, as it does when the dispatch ends otherwise here.

    `changed` is the step whose decision a fork at an approval changes (None otherwise): when
    it ends otherwise than the origin's, `then` (a live harness) is started and handed the
    turn, with a HandedOver saying where it resumes if it can take one (`resume`); without
    `then` the turn ends with `session.error`, as for any divergence.

    For tests and re-drivers: `served` (ids published), `decisions` (how each request ended
    here), `handed_over` (the HandedOver, once the live harness has the turn), `dispatches`
    (how each recorded dispatch ended here), `diverged` (the divergence message, or ""),
    `waiting` (the permission step being decided now), `finished` (set when the turn has
    stopped playing) and `exhausted` (it played every step without a terminal
    event: the recording ran out).
    """

    def __init__(
        self,
        turn: RecordedTurn,
        *,
        threaded: bool = True,
        changed: RecordedStep | None = None,
        then: Harness | None = None,
    ) -> None:
        self.turn = turn
        self.threaded = threaded
        self.changed = changed
        self.then = then
        self.handed_over: HandedOver | None = None
        self.session_id = turn.session_id or "recorded"
        self.served: list[str] = []
        self.decisions: list[str] = []
        self.dispatches: list[str] = []
        self.dispatch: Dispatch | None = None
        self.errors: list[BaseException] = []
        self.aborts: list[str] = []
        self.diverged = ""
        self.waiting: RecordedStep | None = None
        self.finished = threading.Event()
        self._ended = False  # a terminal event was published
        self._publish: Publish | None = None
        self._run = ""  # the run the turn is served for
        self._playing = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_fork(
        cls, log: EventLog, fork_run_id: str, *, views: Views | None = None, then: Harness | None = None
    ) -> RecordedHarness:
        """The harness that serves what fork `fork_run_id`'s origin recorded after its fork point
        (for a fork at an approval, up to that approval; then `then` goes on live)."""
        origin = fork_origin(log, fork_run_id, views)
        turn = recorded_turn(log, origin.origin_run_id, origin.origin_stream, origin.at_seq, views=views)
        changed = None
        if origin.approval_id:
            row = (views or Views(log)).approval(origin.approval_id)
            call_id = row.tool_call_id if row is not None else ""
            changed = next(
                (
                    step
                    for step in turn.steps[turn.reasked :]
                    if step.type == PERMISSION_REQUEST and str(step.data.get("tool_call_id") or "") == call_id
                ),
                None,
            )
            if changed is None:
                why = f"its origin recorded no request of approval {origin.approval_id}"
                raise HarnessError(f"fork {fork_run_id}: {why}")
        return cls(turn, changed=changed, then=then)

    @classmethod
    def after(
        cls, log: EventLog, origin_run_id: str, at_seq: int, *, views: Views | None = None
    ) -> RecordedHarness:
        """The harness that serves what run `origin_run_id` recorded after `at_seq`."""
        views = views or Views(log)
        row = views.agent_run(origin_run_id, at=log.head().seq)
        if row is None:
            raise HarnessError(f"no agent run {origin_run_id!r} in this log")
        return cls(recorded_turn(log, origin_run_id, row.stream, at_seq, views=views))

    @property
    def exhausted(self) -> bool:
        """Every step was played and none ended the run: the recording ran out before a terminal event.

        That happens when the origin was aborted after the fork point, or never ended.
        """
        done = self.finished.is_set() and not self._ended and not self.errors
        return done and not self.diverged and self._run not in self.aborts and self.handed_over is None

    def start(self, publish: Publish) -> str:
        with self._lock:
            self._publish = publish
            self._stop = threading.Event()
        return self.session_id

    def send(self, run_id: str, prompt: str, delivery: str) -> None:
        publish = self._publish
        if publish is None or self._stop.is_set():
            raise HarnessError("the recorded harness is not started")
        with self._lock:
            if self._run:
                what = "a steer" if run_id == self._run else "another run"
                raise HarnessError(f"no recorded result for {what}: the recording serves one turn")
            if prompt != self.turn.prompt:
                raise HarnessError("no recorded result for this prompt: the recording answers the origin's")
            self._run = run_id
            self._playing = True
        if not self.threaded:
            self._play(publish, run_id)
            return
        thread = threading.Thread(
            target=self._play, args=(publish, run_id), name=f"recorded-turn-{run_id[:8]}", daemon=True
        )
        self._thread = thread
        thread.start()

    def _emit(self, publish: Publish, event: HarnessEvent) -> Any:
        result = publish(event)
        self.served.append(event.id)
        if event.type in TERMINAL:
            self._ended = True
        return result

    def _play(self, publish: Publish, run_id: str) -> None:
        stop = self._stop
        try:
            for step in self.turn.steps:
                if stop.is_set() or run_id in self.aborts:
                    return
                if step.type == DISPATCH:
                    diverged = self._dispatch(step)
                elif step.type == PERMISSION_REQUEST:
                    diverged = self._ask(publish, run_id, step)
                else:
                    self._emit(publish, HarnessEvent(step.type, run_id, step.id, dict(step.data)))
                    continue
                if stop.is_set() or run_id in self.aborts:
                    return  # an abort or close ended the step: that is no divergence
                if diverged and step is self.changed and self.then is not None:
                    self._hand_over(publish, run_id, step, self.then)
                    return
                if diverged and step is self.changed:
                    diverged += ": the fork's decision, after which a live harness goes on (none was given)"
                if diverged:
                    self.diverged = f"no recorded result: {diverged}"
                    data = {"message": self.diverged}
                    self._emit(publish, HarnessEvent(SESSION_ERROR, run_id, f"{step.id}/diverged", data))
                    return
        except Exception as e:  # noqa: BLE001 - a refused event ends the turn; tests read .errors
            self.errors.append(e)
        finally:
            with self._lock:
                self._playing = False
                aborted = run_id in self.aborts
            if aborted and not stop.is_set():
                self._idle_after_abort(publish, run_id)
            self.finished.set()

    def _hand_over(self, publish: Publish, run_id: str, step: RecordedStep, live: Harness) -> None:
        """Hand the turn to the live harness after the changed step, which ended otherwise here."""
        at = HandedOver(
            self.turn.origin_run_id, step.id, str(step.data.get("tool_call_id") or ""), self.decisions[-1]
        )
        live.start(publish)
        with self._lock:
            self.handed_over = at
        resume = getattr(live, "resume", None)
        if callable(resume):
            resume(run_id, self.turn.prompt, at.to_dict())
        else:
            live.send(run_id, self.turn.prompt, IMMEDIATE)

    def _ask(self, publish: Publish, run_id: str, step: RecordedStep) -> str:
        """Ask a recorded permission request again; how it diverged from the origin's, or ""."""
        self.waiting = step
        error: Exception | None = None
        try:
            event = HarnessEvent(step.type, run_id, step.id, dict(step.data))
            outcome = str(getattr(self._emit(publish, event), "decision", "") or ERROR)
        except Exception as e:  # noqa: BLE001 - a failed request is an outcome, as recorded
            self.errors.append(e)
            error, outcome = e, ERROR
        finally:
            self.waiting = None
        self.decisions.append(outcome)
        if not step.decision or outcome == step.decision:
            return ""
        if isinstance(error, NoRecordedResultError):
            return str(error).removeprefix("no recorded result: ")
        why = f" ({error})" if error is not None else ""
        return (
            f"permission request {step.id} ended {outcome!r} here{why} "
            f"and {step.decision!r} in run {self.turn.origin_run_id}"
        )

    def _dispatch(self, step: RecordedStep) -> str:
        """Dispatch what the origin's gate dispatched here; how it diverged from the origin's, or ""."""
        data, origin = step.data, self.turn.origin_run_id
        intent, dispatch = data.get("input"), self.dispatch
        if dispatch is None:
            return f"reconcile dispatch {step.id} has no controller to dispatch through"
        if not isinstance(intent, dict):
            digest = str(data["input_sha256"])[:12]
            return f"reconcile dispatch {step.id}: run {origin} recorded no input of digest {digest}"
        why = ""
        try:
            dispatch(dict(intent), step.id)
            outcome = DISPATCHED
        except Exception as e:  # noqa: BLE001 - a refused or failed dispatch is an outcome, as recorded
            if isinstance(e, NoRecordedResultError):
                self.dispatches.append(FAILED)
                return str(e).removeprefix("no recorded result: ")
            outcome, why = str(getattr(e, "outcome", "") or FAILED), f" ({e})"
        self.dispatches.append(outcome)
        if outcome == data["outcome"]:
            return ""
        recorded = data["outcome"]
        return f"reconcile dispatch {step.id} ended {outcome!r} here{why} and {recorded!r} in run {origin}"

    def _idle_after_abort(self, publish: Publish, run_id: str) -> None:
        """The turn has stopped for an abort (not a recorded event: it is not in `served`)."""
        try:
            publish(HarnessEvent(SESSION_IDLE, run_id, f"{run_id}/aborted"))
        except Exception as e:  # noqa: BLE001 - kept for tests, as a refused event
            self.errors.append(e)

    def abort(self, run_id: str) -> None:
        """Stop the run's turn before its next step; `session.idle` follows once it has stopped
        (once the live harness has the turn, it is the one aborted)."""
        with self._lock:
            live = self.then if self.handed_over is not None else None
            if live is None:
                self.aborts.append(run_id)
            playing = self._playing and self._run == run_id
        if live is not None:
            live.abort(run_id)
            return
        publish = self._publish
        if not playing and publish is not None:
            self._idle_after_abort(publish, run_id)

    def join(self, timeout: float = JOIN_TIMEOUT) -> bool:
        """Wait until the turn played in a thread has stopped; False if it is still playing."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def close(self) -> None:
        with self._lock:
            self._stop.set()
        self.join()
        if self.then is not None:
            self.then.close()
