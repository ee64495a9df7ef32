"""The reconcile gate: prepare → approval (with quorum) → a one-time approval → dispatch once.

The approval binds to the SHA-256 of the intent's canonical JSON. Dispatch consumes the
one-time approval before any check, so it can never be used twice, and refuses it when it
is missing, past its expiry, or for an input that changed after approval.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

import orjson

from eventlog import Clock
from eventlog.events import ReconcileDispatched, ReconcilePrepared

from .._errors import NoRecordedResultError, ReconcileError
from ..approvals import APPROVE, ApprovalQueue, ApprovalRequest, ApprovalResolution
from ..harnesses import HarnessEvent
from .actor import Lifecycle, RecordGate
from .decider import ControllerState, OneTime

# How a dispatch ended, as its ReconcileDispatched event records it.
DISPATCHED = "dispatched"
REFUSED = "refused"
FAILED = "failed"
NO_EVIDENCE = "no evidence"  # the detail of a dispatch whose reconciler returned nothing


class Reconciler(Protocol):
    """Resolves and applies desired state; it receives copies and may keep neither input."""

    def prepare(self, intent: dict[str, Any]) -> dict[str, Any]:
        """The revision that applying `intent` would produce."""
        ...

    def reconcile_approved(self, intent: dict[str, Any], revision: dict[str, Any]) -> dict[str, Any] | None:
        """Apply an approved intent; return evidence of what was done."""
        ...


def intent_digest(intent: Mapping[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(intent, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _checked(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ReconcileError(f"{what} must be a JSON object")
    try:
        return dict(orjson.loads(orjson.dumps(value)))  # a deep, JSON-clean copy
    except (TypeError, orjson.JSONDecodeError) as e:
        raise ReconcileError(f"{what} is not valid JSON: {e}") from e


class ReconcileGate:
    """The gate of one controller: its id, actor, clock, approval queue and current state."""

    def __init__(
        self,
        controller_id: str,
        actor: Any,
        clock: Clock,
        approvals: ApprovalQueue,
        state: Callable[[], ControllerState],
        reconciler: Reconciler | None,
    ) -> None:
        self._id = controller_id
        self._actor = actor
        self._clock = clock
        self._approvals = approvals
        self._state = state
        self._reconciler = reconciler

    def request(self, event: HarnessEvent, cancel: threading.Event) -> ApprovalResolution:
        """Steps 1 to 3: prepare, ask for a quorum approval, store the one-time approval."""
        data = event.data
        tool_call_id = str(data.get("tool_call_id") or "")
        if not tool_call_id:
            raise ReconcileError("reconcile approval requires a tool call ID")
        if self._reconciler is None:
            raise ReconcileError("reconciler is unavailable")
        actor = self._actor
        lifecycle = actor.ask(Lifecycle())
        actor.ask(RecordGate(drop=tool_call_id))
        intent = _checked(data.get("input"), "reconcile intent")
        revision = _checked(self._reconciler.prepare(copy.deepcopy(intent)), "reconcile revision")
        digest = intent_digest(intent)
        now = self._clock.now()
        actor.ask(RecordGate((ReconcilePrepared(event.run_id, tool_call_id, digest, revision, now),)))
        detail = orjson.dumps({"input": intent, "revision": revision}, option=orjson.OPT_SORT_KEYS).decode()
        request = ApprovalRequest(
            kind=str(data.get("kind") or "reconcile"),
            title=str(data.get("title") or "Approve reconcile"),
            detail=detail,
            risk=str(data.get("risk") or "high"),
            run_id=event.run_id,
            tool_call_id=tool_call_id,
            payload=intent,
            requires_fleet_quorum=True,
        )
        resolution = self._approvals.request(request, cancel=cancel, requested_by=f"controller:{self._id}")
        if resolution.decision == APPROVE:
            if cancel.is_set():
                raise ReconcileError("reconcile approval was invalidated before dispatch")
            grant = OneTime(resolution.approval.id, digest, revision, resolution.approval.expires_at)
            actor.ask(RecordGate(store=(tool_call_id, grant), lifecycle=lifecycle))
        return resolution

    def dispatch(self, intent: Mapping[str, Any], tool_call_id: str) -> dict[str, Any]:
        """Step 4: consume the one-time approval, check it, and apply exactly once."""
        if not tool_call_id:
            raise ReconcileError("reconcile dispatch requires a tool call ID")
        clean = _checked(intent, "reconcile intent")
        actor = self._actor
        grant = cast(OneTime | None, actor.ask(RecordGate(take=tool_call_id)))
        digest = intent_digest(clean)
        current = self._state().run
        run_id = current.id if current is not None else ""

        def outcome(result: str, detail: str = "") -> None:
            actor.ask(
                RecordGate(
                    (ReconcileDispatched(run_id, tool_call_id, digest, result, detail, self._clock.now()),)
                )
            )

        if grant is None:
            outcome(REFUSED, "no matching one-time approval")
            raise ReconcileError("reconcile dispatch has no matching one-time approval", REFUSED)
        if self._clock.now() >= grant.expires_at:
            outcome(REFUSED, "expired")
            raise ReconcileError("reconcile approval expired before dispatch", REFUSED)
        if digest != grant.input_sha256:
            outcome(REFUSED, "input changed")
            raise ReconcileError("reconcile input changed after approval", REFUSED)
        if self._reconciler is None:
            raise ReconcileError("reconciler is unavailable")
        try:
            evidence = self._reconciler.reconcile_approved(
                copy.deepcopy(clean), copy.deepcopy(grant.revision)
            )
        except NoRecordedResultError as e:
            outcome(FAILED, str(e))
            raise  # typed as it is: a re-drive from the recording ends on it
        except Exception as e:
            outcome(FAILED, str(e))
            raise ReconcileError(f"reconcile failed: {e}", FAILED) from e
        if evidence is None:
            outcome(FAILED, NO_EVIDENCE)
            raise ReconcileError("reconciler returned no evidence", FAILED)
        checked = _checked(evidence, "reconcile evidence")
        outcome(DISPATCHED)
        return checked
