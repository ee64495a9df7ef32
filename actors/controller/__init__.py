"""The operator controller: admission, fencing, steer/abort, the reconcile gate and forks."""

# Layering: actors.controller imports the actors shell, actors.approvals and actors.harnesses (their
# front doors), eventlog and projections; never broker, sessions or tools.

from .controller import Controller, RunStarted, RunState, make_title
from .decider import ABORTED, ABORTING, FAILED, IDLE, PERSISTING, RUNNING, STARTING, STOPPED, SUCCEEDED
from .fork import Fork, fork_controller_id, fork_origin, fork_run, fork_run_at_approval
from .reconcile import Reconciler, intent_digest
from .recorded_harness import RecordedHarness
from .recorded_reconciler import RecordedReconciler
from .recording import RecordedStep, RecordedTurn, recorded_turn

__all__ = [
    "ABORTED",
    "ABORTING",
    "FAILED",
    "IDLE",
    "PERSISTING",
    "RUNNING",
    "STARTING",
    "STOPPED",
    "SUCCEEDED",
    "Controller",
    "Fork",
    "Reconciler",
    "RecordedHarness",
    "RecordedReconciler",
    "RecordedStep",
    "RecordedTurn",
    "RunStarted",
    "RunState",
    "fork_controller_id",
    "fork_origin",
    "fork_run",
    "fork_run_at_approval",
    "intent_digest",
    "make_title",
    "recorded_turn",
]
