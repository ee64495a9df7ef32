"""Forks: record one (`actors.fork_run`), then re-drive it to its end (the CLI and the console).

Re-driving runs the fork's controller in this process until the run it drives has ended
(the controller is idle again). From the recording, reconciles are served by the origin's
recorded results (`System.fork_controller` sets that up). Permission requests wait in the
approval gate for whoever decides them (`flightlog approve` beside it, or the approval
timeout); with `apply_recorded` each one is decided as the origin's was: every recorded
vote again, in order, each by its voter as `<voter> (recorded)`, with the re-driver as its
identity. Who re-drives (`actor`) is also the actor in the meta of the events that resume
the fork. If the recording runs out
before a terminal event (the origin was aborted after the fork point, or never ended), the
fork's run is aborted.

A fork at an approval (`actors.fork_at_approval`) is re-driven from the recording in any
case: its approval is asked again and decided as the fork says, by whom its ForkedFrom names
(the operator who asked for the fork); a harness given then goes on live once that decision
differs from the origin's (a decision equal to the origin's lets the recording serve on).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors import (
    EXPIRED,
    IDLE,
    RUNNING,
    Approval,
    ApprovalError,
    ApprovalQueue,
    Fork,
    ForkError,
    Harness,
    QuorumPendingError,
    RecordedHarness,
    System,
    fork_origin,
    fork_run,
)
from eventlog.events import ForkedFrom

__all__ = ["Fork", "ForkError", "Redriven", "fork_run", "redrive"]

WAKE = 0.2  # seconds between looks at a recording that may have run out (no event says so)


@dataclass(frozen=True, slots=True)
class Redriven:
    """How a fork's re-drive ended: the run it drove, that run's status, and what was served."""

    fork_run_id: str
    run_id: str
    status: str
    reason: str
    recorded: bool
    served: int = 0  # recorded events published again
    decisions: tuple[str, ...] = ()  # how the fork's permission requests ended, in order
    dispatches: tuple[str, ...] = ()  # how the recorded reconcile dispatches ended in the fork
    diverged: str = ""  # why the recording stopped serving, if a decision differed from the origin's
    ran_out: bool = False  # the recording ended before a terminal event: the run was aborted
    broke: str = ""  # why the recording could not be served on (an event refused): the run was aborted
    handed_over: bool = False  # after the fork's changed decision, a live harness went on with the turn

    def to_dict(self) -> dict[str, Any]:
        return {
            "fork_run_id": self.fork_run_id,
            "run_id": self.run_id,
            "status": self.status,
            "reason": self.reason,
            "recorded": self.recorded,
            "served": self.served,
            "decisions": list(self.decisions),
            "dispatches": list(self.dispatches),
            "diverged": self.diverged,
            "ran_out": self.ran_out,
            "broke": self.broke,
            "handed_over": self.handed_over,
        }


def redrive(
    system: System,
    fork_run_id: str,
    harness: Harness | None = None,
    *,
    prompt: str | None = None,
    apply_recorded: bool = False,
    actor: str = "",
    on_pending: Callable[[Approval], object] | None = None,
) -> Redriven:
    """Re-drive fork `fork_run_id` until the run it drives has ended; return how it ended.

    Without `harness` the fork's recording is served (RecordedHarness, with a
    RecordedReconciler). `actor` is who re-drives, kept in the log (see the module's
    docstring). `on_pending` hears of each approval of the run that waits for someone to
    decide it.
    """
    recording: RecordedHarness | None = None
    opening = fork_origin(system.log, fork_run_id, system.views)
    if opening.approval_id:
        if prompt is not None:
            raise ForkError("a fork at an approval resumes the origin's turn, with its prompt")
        harness = recording = RecordedHarness.for_fork(
            system.log, fork_run_id, views=system.views, then=harness
        )
    elif harness is None:
        harness = recording = RecordedHarness.for_fork(system.log, fork_run_id, views=system.views)
    elif apply_recorded:
        raise ForkError("recorded decisions apply only to a re-drive from the recording")
    change = _Change(opening, system)
    ctrl = system.fork_controller(fork_run_id, harness)
    queue = ctrl.approval_queue()
    signal, unsubscribe = ctrl.subscribe()
    ran_out, broke = False, ""
    try:
        run_id = ctrl.redrive(prompt, actor=actor)
        seen: set[str] = set()
        while not (ctrl.status() == IDLE and ctrl.run().status != RUNNING):
            if recording is not None and recording.finished.is_set() and ctrl.run().status == RUNNING:
                # The turn stopped without ending the run: it ran out, or an event it served
                # was refused. Nothing would end the run now, so the re-drive aborts it.
                if recording.errors and not broke:
                    broke = f"{type(recording.errors[0]).__name__}: {recording.errors[0]}"
                    ctrl.abort()
                    continue
                if recording.exhausted and not ran_out:
                    ran_out = True
                    ctrl.abort()
                    continue
            for approval in queue.pending():
                if approval.run_id != run_id or approval.id in seen:
                    continue
                seen.add(approval.id)
                if change.applies(approval) and change.decide(queue, approval):
                    continue
                step = recording.waiting if recording is not None else None
                if apply_recorded and step is not None and _apply(queue, approval, step.votes, actor):
                    continue
                if on_pending is not None:
                    on_pending(approval)
            signal.wait(WAKE)
        run = ctrl.run()
    finally:
        unsubscribe()
        ctrl.close()
    reason = _reason(system, run.id)
    if recording is None:
        return Redriven(fork_run_id, run.id, run.status, reason, False)
    return Redriven(
        fork_run_id, run.id, run.status, reason, True, len(recording.served), tuple(recording.decisions),
        tuple(recording.dispatches), recording.diverged, ran_out, broke, recording.handed_over is not None,
    )  # fmt: skip


class _Change:
    """The decision a fork at an approval takes there: applied once, to the first approval of its
    tool call, as the operator its ForkedFrom names."""

    def __init__(self, opening: ForkedFrom, system: System) -> None:
        self.opening = opening
        row = system.views.approval(opening.approval_id) if opening.approval_id else None
        self.tool_call_id = row.tool_call_id if row is not None else None
        self.done = False

    def applies(self, approval: Approval) -> bool:
        return not self.done and self.tool_call_id is not None and approval.tool_call_id == self.tool_call_id

    def decide(self, queue: ApprovalQueue, approval: Approval) -> bool:
        """Decide `approval` as the fork says; False if it still waits (a quorum wants more votes)."""
        o = self.opening
        self.done = True
        why = f"fork of run {o.origin_run_id} at approval {o.approval_id}" + (
            f": {o.reason}" if o.reason else ""
        )
        try:
            queue.resolve(approval.id, o.decision, o.decided_by, identity=o.identity, reason=why)
        except QuorumPendingError:
            return False  # one vote: the others are someone else's
        except ApprovalError:
            return True  # decided meanwhile (by an operator or its deadline): that outcome stands
        return True


def _apply(
    queue: ApprovalQueue, approval: Approval, votes: tuple[tuple[str, str], ...], identity: str
) -> bool:
    """Cast the origin's votes on `approval` again, in order, on behalf of `identity`; False if it
    still waits. Each recorded voter's vote is cast under its own replay identity, so the
    origin's distinct voters still make a quorum of distinct credentials."""
    if not votes:
        return False  # the origin's request failed or never ended: someone decides this one
    short = False  # the recorded votes did not reach this gate's quorum: someone adds the rest
    for voter, decision in votes:
        who = f"{voter} (recorded)"
        try:
            if decision == EXPIRED:
                queue.expire_run(approval.run_id, who)
            else:
                queue.resolve(approval.id, decision, who, identity=f"{identity} replaying {voter}")
            short = False
        except QuorumPendingError:
            short = True  # counted: the next recorded vote goes on towards the quorum
        except ApprovalError:
            return True  # decided meanwhile (by an operator or its deadline): that outcome stands
    return not short


def _reason(system: System, run_id: str) -> str:
    row = system.views.agent_run(run_id, at=system.log.head().seq)
    return row.reason if row is not None else ""
