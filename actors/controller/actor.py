"""The controller's actor: folds `controller-<id>`, then steps and appends, one command at a time."""

from __future__ import annotations

import dataclasses
from typing import Any

import pykka

from eventlog import NO_STREAM, Clock, ConcurrencyError, Event, EventLog, encode
from eventlog.events import ReconcileApprovalDropped, ReconcileApprovalGranted

from .._aggregate import folded
from .._errors import ContentionError, ReconcileError
from .decider import ABORTING, STOPPED, ControllerState, OneTime, Started, Step, fold, step

CONSUMED = "consumed by dispatch"  # why a dispatch drops the one-time approval it takes


@dataclasses.dataclass(frozen=True, slots=True)
class RecordGate:
    """Message: record reconcile-gate events, optionally storing or taking a one-time approval.

    `store` keeps (tool_call_id, OneTime) unless the controller is aborting or stopped, or the
    lifecycle it was asked in has ended (`lifecycle` differs); `take` removes and returns one.
    """

    events: tuple[Event, ...] = ()
    store: tuple[str, OneTime] | None = None
    take: str = ""
    drop: str = ""
    lifecycle: object = None


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    """Message: reply with the current state."""


@dataclasses.dataclass(frozen=True, slots=True)
class Lifecycle:
    """Message: reply with the token of the current lifecycle (a new one at every start)."""


class ControllerActor(pykka.ThreadingActor):
    def __init__(self, log: EventLog, clock: Clock, controller_id: str) -> None:
        super().__init__()
        self.log = log
        self.clock = clock
        self.stream = f"controller-{controller_id}"
        self.state = ControllerState(controller_id)
        self.version = 0
        self.lifecycle: object = object()  # replaced at every start: a gate asked before is stale

    def on_start(self) -> None:
        self._refresh()

    def _refresh(self) -> None:
        for record in self.log.read(self.stream, from_version=self.version + 1):
            self.state = folded(self.state, record, fold)
            self.version = record.version

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Snapshot):
            return self.state
        if isinstance(message, Lifecycle):
            return self.lifecycle
        if isinstance(message, RecordGate):
            return self._gate(message)
        return self._step(message)

    def _gate(self, m: RecordGate) -> OneTime | None:
        one_time = dict(self.state.one_time)
        events = list(m.events)
        now = self.clock.now()
        run_id = self.state.run.id if self.state.run else ""
        taken: OneTime | None = None
        if m.drop and m.drop in one_time:
            del one_time[m.drop]
            events.insert(0, ReconcileApprovalDropped(run_id, (m.drop,), "replaced by a new request", now))
        if m.take:
            taken = one_time.pop(m.take, None)
            if taken is not None:
                events.append(ReconcileApprovalDropped(run_id, (m.take,), CONSUMED, now))
        if m.store is not None:
            if self.state.phase in (ABORTING, STOPPED) or m.lifecycle is not self.lifecycle:
                raise ReconcileError("reconcile approval was invalidated before dispatch")
            tool_call_id, grant = m.store
            one_time[tool_call_id] = grant
            events.append(
                ReconcileApprovalGranted(
                    run_id, tool_call_id, grant.approval_id, grant.input_sha256, grant.expires_at, now
                )
            )
        if events:
            records = self.log.append(
                self.stream,
                [encode(e, meta={"actor": "controller"}) for e in events],
                expect=self.version or NO_STREAM,
            )
            self.version = records[-1].version
        self.state = dataclasses.replace(self.state, one_time=tuple(one_time.items()))
        return taken

    def _step(self, command: object) -> Step:
        by = command.by if isinstance(command, Started) else ""
        meta = {"actor": by or "controller"}
        for _ in range(8):
            result = step(self.state, command, self.clock.now())
            if not result.events:
                self.state = result.state
                return result
            try:
                records = self.log.append(
                    self.stream,
                    [encode(e, meta=meta) for e in result.events],
                    expect=self.version or NO_STREAM,
                )
            except ConcurrencyError:
                # Another process wrote to this controller: fold its events, decide again.
                self._refresh()
                continue
            self.version = records[-1].version
            self.state = result.state
            if isinstance(command, Started):
                self.lifecycle = object()
            return result
        raise ContentionError(self.stream, 8)
