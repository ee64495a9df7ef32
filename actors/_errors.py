"""The actors exception tree.

ActorsError
├── ApprovalError                   the approval gate refused or failed an operation
│   ├── ApprovalCancelledError          the waiting request was cancelled (expired by runtime)
│   ├── ApprovalExpiredError            the decision came at or after the deadline (.resolution)
│   ├── ApprovalExpireRunError          expiring a run's approvals met problems (.errors)
│   ├── ApprovalHookError               an on_resolved hook failed after the outcome was recorded
│   ├── ApprovalNotPendingError         unknown or already decided (.id; also LookupError)
│   ├── ApprovalRecordingError          the request is still being recorded
│   ├── ApprovalRequestError            the on_requested hook failed; the request was discarded
│   ├── ApprovalResolvingError          another writer's resolution is in progress
│   ├── ApprovalValidationError         a bad request or decision; nothing recorded (also ValueError)
│   ├── DuplicateVoteError              the same actor or credential approved a quorum approval twice
│   └── QuorumPendingError              the vote counted; more distinct approvers are needed
├── BrokerError                     (in `actors._broker_errors`)
├── ContentionError                 a stream kept changing under an actor's decisions
├── ControllerError                 the operator controller refused or failed an operation
│   ├── ControllerBusyError             a turn is running or stopping (admission refused)
│   ├── ControllerValidationError       a bad prompt or delivery (also ValueError)
│   ├── HarnessError                    a harness could not start, reach or stop its agent
│   ├── HarnessEventError               a harness event for a run that is not the active one
│   ├── ReconcileError                  the reconcile gate refused or failed a step (.outcome)
│   │   └── NoRecordedResultError           a recorded reconciler holds no result for what it is asked
│   ├── RunConflictError                the caller's run is not the current one
│   ├── RunNotActiveError               the run cannot be steered now
│   └── SessionConflictError            the caller's session is not the current one
├── ForkError                       a run cannot be forked, or a fork re-driven, as asked (also ValueError)
│   ├── ApprovalNotInRunError           no such approval among the run's (also LookupError)
│   ├── ApprovalStillPendingError       the approval to fork at has no outcome yet
│   ├── ForkNotFoundError               no fork with that run id (also LookupError)
│   ├── ForkRedrivenError               the fork was re-driven already, or another re-drive won
│   └── NotAForkError                   the id names a run or stream that is not a fork
├── InvalidToolOverrideScopeError   a scope outside the tool-override vocabulary (also ValueError)
├── OperatorError                   (in `actors._broker_errors`)
├── ProjectError                    a project or its workspace cannot be used
│   ├── InvalidBaseDirError             base_dir is empty, relative or escapes the workspace (also ValueError)
│   ├── ProjectNotFoundError            missing, foreign or bound to another agent (also LookupError)
│   ├── WorkspaceIdError                an agent, user or group id unusable as a directory (also ValueError)
│   └── WorkspaceSetupError             the workspace directories could not be created
└── SessionError                    a session cannot be resolved or used as asked
    ├── GroupCompactionUnsupportedError compaction asked of a group session
    ├── InvalidSessionRequestError      a session request without its user or agent (also ValueError)
    ├── SessionArchivedError            the session is archived
    ├── SessionForbiddenError           the caller does not own the session
    ├── SessionNotFoundError            no such session, and none may be created (also LookupError)
    └── SessionWrongKindError           the session is of another kind than required
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any


class ActorsError(Exception):
    """Raised when the live system refuses or fails an operation."""


class InvalidToolOverrideScopeError(ActorsError, ValueError):
    """Raised when a tool override names a scope outside the four known ones."""

    def __init__(self, scope: str) -> None:
        super().__init__(f"tool override: invalid scope {quoted(scope)}")
        self.scope = scope


class ProjectError(ActorsError):
    """Raised when a project or its workspace cannot be used."""


class InvalidBaseDirError(ProjectError, ValueError):
    """Raised when a project's base_dir is empty, relative, or not inside the user workspace.

    The message says which rule failed; `sentinel` is the seed's opaque `invalid base_dir`
    that an HTTP edge maps to 400.
    """

    sentinel = "invalid base_dir"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProjectNotFoundError(ProjectError, LookupError):
    """Raised when a project is missing, owned by another user, or bound to another agent.

    The three cases are indistinguishable on purpose: a mismatch never confirms that the
    project exists.
    """

    def __init__(self, project_id: str = "") -> None:
        super().__init__("project not found")
        self.project_id = project_id


class WorkspaceIdError(ProjectError, ValueError):
    """Raised when an agent, user or group id is empty or is not a single path component."""


class WorkspaceSetupError(ProjectError):
    """Raised when the workspace directories cannot be resolved or created (HTTP 500).

    The message starts with the seed's `failed to resolve workspace`; the OSError that
    caused it is chained as `__cause__`.
    """

    sentinel = "failed to resolve workspace"

    def __init__(self, detail: str = "") -> None:
        super().__init__(f"{self.sentinel}: {detail}" if detail else self.sentinel)
        self.detail = detail


class SessionError(ActorsError):
    """Raised when a session cannot be resolved or used as asked."""


class GroupCompactionUnsupportedError(SessionError):
    """Raised when compaction is asked of a group session, before any compactor runs."""

    def __init__(self) -> None:
        super().__init__("compaction is not supported for group sessions")


class InvalidSessionRequestError(SessionError, ValueError):
    """Raised when a session request lacks its user or its agent."""


class SessionArchivedError(SessionError):
    """Raised when an archived session is resumed."""

    def __init__(self, session_id: str = "") -> None:
        super().__init__("session is archived")
        self.session_id = session_id


class SessionForbiddenError(SessionError):
    """Raised when a session belongs to another user, agent or group than the caller's."""

    def __init__(self, session_id: str = "") -> None:
        super().__init__("session access forbidden")
        self.session_id = session_id


class SessionNotFoundError(SessionError, LookupError):
    """Raised when a session does not exist and the request may not create it."""

    def __init__(self, session_id: str = "") -> None:
        super().__init__(f"session not found: {session_id}" if session_id else "session not found")
        self.session_id = session_id


class SessionWrongKindError(SessionError):
    """Raised when a session's kind differs from the kind the request requires."""

    def __init__(self, got: str, want: str, session_id: str = "") -> None:
        super().__init__(f"session kind mismatch: got {quoted(got)}, want {quoted(want)}")
        self.got = got
        self.want = want
        self.session_id = session_id


def quoted(text: str) -> str:
    # Go's %q: double quotes with control characters escaped, so a hostile value can
    # neither break the message nor forge a second line in a log.
    return json.dumps(text, ensure_ascii=False)


class ApprovalError(ActorsError):
    """Raised when the approval gate refuses or fails an operation."""


class ApprovalValidationError(ApprovalError, ValueError):
    """Raised when a request or decision is malformed; nothing is recorded."""


class ApprovalNotPendingError(ApprovalError, LookupError):
    """Raised when an approval is unknown or already has its outcome."""

    def __init__(self, id: str) -> None:
        super().__init__(f"approval {quoted(id)} is not pending")
        self.id = id


class ApprovalRecordingError(ApprovalError):
    """Raised when a decision arrives while the request is still being recorded."""

    sentinel = "approval request is still being recorded"

    def __init__(self, id: str) -> None:
        super().__init__(f"{self.sentinel}: {quoted(id)}")
        self.id = id


class ApprovalResolvingError(ApprovalError):
    """Raised when another writer's resolution of the same approval is in progress."""

    sentinel = "approval resolution is already in progress"

    def __init__(self, id: str) -> None:
        super().__init__(f"{self.sentinel}: {quoted(id)}")
        self.id = id


class ApprovalExpiredError(ApprovalError):
    """Raised when a decision arrives at or after the deadline; `.resolution` is the expiry."""

    sentinel = "approval expired"

    def __init__(self, resolution: Any, actor: str, decision: str) -> None:
        expires = _rfc3339nano(resolution.approval.expires_at)
        super().__init__(
            f"{self.sentinel}: approval {quoted(resolution.approval.id)} expired at {expires} "
            f"before {quoted(actor)} could submit {quoted(decision)}"
        )
        self.resolution = resolution


def _rfc3339nano(when: datetime) -> str:
    # Go's time.RFC3339Nano in UTC: trailing zeros of the fraction trimmed, no dot for none.
    when = when.astimezone(UTC)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if when.microsecond:
        text += f".{when.microsecond:06d}".rstrip("0")
    return text + "Z"


class ApprovalRequestError(ApprovalError):
    """Raised when the on_requested hook fails: the request is discarded, never published."""


class ApprovalHookError(ApprovalError):
    """Raised when on_resolved fails after the outcome was recorded; `.resolution` still holds it."""

    def __init__(self, resolution: Any, cause: BaseException) -> None:
        super().__init__(f"recording approval resolution: {cause}")
        self.resolution = resolution


class ApprovalCancelledError(ApprovalError):
    """Raised when a waiting request is cancelled; the approval expires with actor `runtime`."""

    def __init__(self, id: str) -> None:
        super().__init__(f"approval request {quoted(id)} cancelled")
        self.id = id


class ApprovalExpireRunError(ApprovalError):
    """Raised when expiring a run's approvals met problems; `.errors` lists each one."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


class DuplicateVoteError(ApprovalError):
    """Raised when an actor approves a quorum approval it already approved."""

    def __init__(self, id: str, actor: str, why: str = "") -> None:
        super().__init__(f"approval {quoted(id)}: {why or quoted(actor) + ' has already approved'}")
        self.id = id
        self.actor = actor


class QuorumPendingError(ApprovalError):
    """Raised when an approve vote was recorded but the quorum is not reached yet."""

    def __init__(self, id: str, votes: int, needed: int) -> None:
        super().__init__(f"approval {quoted(id)}: {votes} of {needed} approvals recorded")
        self.id = id
        self.votes = votes
        self.needed = needed


class ForkError(ActorsError, ValueError):
    """Raised when a run cannot be forked at the seq asked for, or a fork cannot be re-driven as asked."""


class ApprovalNotInRunError(ForkError, LookupError):
    """Raised when a fork at an approval names an approval that is not one of the run's."""


class ApprovalStillPendingError(ForkError):
    """Raised when a fork at an approval names one still waiting for its outcome: decide it first."""


class ForkNotFoundError(ForkError, LookupError):
    """Raised when no fork stream exists for the run id given."""


class NotAForkError(ForkError):
    """Raised when the run or controller stream named is not a fork (no ForkedFrom opens it)."""


class ForkRedrivenError(ForkError):
    """Raised when a fork was already re-driven, by an earlier call or by a concurrent one that won.

    A fork is re-driven once; after that it is an ordinary controller stream, opened with
    `System.controller(harness, controller_id="fork-<id>")`.
    """


class ContentionError(ActorsError):
    """Raised when a stream keeps changing under an actor's decisions (retries exhausted)."""

    def __init__(self, stream: str, attempts: int) -> None:
        super().__init__(f"{stream}: still conflicting after {attempts} attempts")
        self.stream = stream


class ControllerError(ActorsError):
    """Raised when the operator controller refuses or fails an operation."""


class ControllerValidationError(ControllerError, ValueError):
    """Raised when a prompt is empty or a delivery is not immediate or enqueue."""


class ControllerBusyError(ControllerError):
    """Raised when a prompt arrives while a turn is running, aborting or persisting."""

    def __init__(self) -> None:
        super().__init__("the agent is already running or stopping a turn")


class SessionConflictError(ControllerError):
    """Raised when an action targets a different harness session than the current one."""

    def __init__(self) -> None:
        super().__init__("agent session changed")


class RunConflictError(ControllerError):
    """Raised when an action targets an older or otherwise different run."""

    def __init__(self) -> None:
        super().__init__("agent run changed")


class RunNotActiveError(ControllerError):
    """Raised when the targeted run cannot currently be steered."""

    def __init__(self) -> None:
        super().__init__("agent run is not active")


class HarnessError(ControllerError):
    """Raised when a harness cannot start, reach or stop the agent it runs."""


class HarnessEventError(ControllerError):
    """Raised when a harness publishes an event for a run that is not the active one."""


class ReconcileError(ControllerError):
    """Raised when the reconcile gate refuses or fails a step; the message says which.

    `outcome` is what a refused or failed dispatch recorded (`refused`, `failed`), else "".
    """

    def __init__(self, message: str, outcome: str = "") -> None:
        super().__init__(message)
        self.outcome = outcome


class NoRecordedResultError(ReconcileError):
    """Raised when a recorded reconciler is asked for an intent its origin did not prepare or dispatch there.

    Nothing live is called instead: the step fails, and a re-drive from the recording ends.
    """
