"""RecordedReconciler: answers the reconcile gate as the origin's reconciler did, and applies nothing.

A re-drive from the recording takes its reconciles through the same gate steps as the
origin (prepare, approval, one-time approval, dispatch), so the fork's log records them as
the origin's did; only the reconciler is served from the recording. It is keyed by the
intent's digest, and each recorded answer is served once, in the origin's order.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from typing import Any

from eventlog import EventLog
from projections import Views

from .._errors import NoRecordedResultError, ReconcileError
from .fork import fork_origin
from .reconcile import DISPATCHED, FAILED, NO_EVIDENCE, intent_digest
from .recording import DISPATCH, RecordedTurn, recorded_turn


class RecordedReconciler:
    """A Reconciler that serves the origin run's recorded reconcile results after the fork point.

    `prepare` returns the revision the origin prepared for the same intent. `reconcile_approved`
    returns what the origin's dispatch of it gave: the evidence the origin's run reported for
    it (or, if it reported none, where the dispatch is recorded), or the same failure again.
    An intent the origin did not prepare, or did not dispatch, there raises
    NoRecordedResultError; nothing live is ever called. `prepared` and `dispatched` list the
    digests served, for tests and re-drivers.
    """

    def __init__(self, turn: RecordedTurn) -> None:
        self.origin_run_id = turn.origin_run_id
        self.prepared: list[str] = []
        self.dispatched: list[str] = []
        self._lock = threading.Lock()
        self._revisions: dict[str, deque[dict[str, Any]]] = {}
        for digest, revision in turn.prepared:
            self._revisions.setdefault(digest, deque()).append(revision)
        self._results: dict[str, deque[dict[str, Any]]] = {}
        for step in turn.steps:
            # A refused dispatch never reached the origin's reconciler: it has no result to serve.
            if step.type == DISPATCH and step.data["outcome"] in (DISPATCHED, FAILED):
                self._results.setdefault(step.data["input_sha256"], deque()).append(step.data)

    @classmethod
    def for_fork(cls, log: EventLog, fork_run_id: str, *, views: Views | None = None) -> RecordedReconciler:
        """The reconciler that serves what fork `fork_run_id`'s origin recorded after its fork point."""
        origin = fork_origin(log, fork_run_id, views)
        return cls(recorded_turn(log, origin.origin_run_id, origin.origin_stream, origin.at_seq, views=views))

    def prepare(self, intent: dict[str, Any]) -> dict[str, Any]:
        digest = intent_digest(intent)
        with self._lock:
            revisions = self._revisions.get(digest)
            if not revisions:
                raise NoRecordedResultError(self._missing("prepared", digest))
            self.prepared.append(digest)
            return copy.deepcopy(revisions.popleft())

    def reconcile_approved(self, intent: dict[str, Any], revision: dict[str, Any]) -> dict[str, Any] | None:
        digest = intent_digest(intent)
        with self._lock:
            results = self._results.get(digest)
            if not results:
                raise NoRecordedResultError(self._missing("dispatched", digest), FAILED)
            self.dispatched.append(digest)
            result = results.popleft()
        if result["outcome"] == FAILED:
            if result["detail"] == NO_EVIDENCE:
                return None  # the gate records that failure again, as it did in the origin
            raise ReconcileError(result["detail"], FAILED)
        evidence = result.get("evidence")
        if isinstance(evidence, dict):
            return copy.deepcopy(evidence)
        return {"recorded": {"run_id": self.origin_run_id, "tool_call_id": result["tool_call_id"]}}

    def _missing(self, what: str, digest: str) -> str:
        return (
            f"no recorded result: run {self.origin_run_id} {what} no reconcile of input "
            f"{digest[:12]} at this point of its recording"
        )
