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
├── BrokerError                     the broker refused an operation on a run
│   ├── AskError                        an ask cannot be sent, answered, awaited or cancelled (.status)
│   │   ├── AskConflictError                its message id is in use, or it would be a mutual ask (409)
│   │   ├── AskInvalidError                 an ask without a message id (400; also ValueError)
│   │   ├── AskNotFoundError                no pending ask with that id from that run (404; also LookupError)
│   │   └── NotAskPartyError                the caller is not the ask's target, or not its sender (403)
│   ├── ControlQueueFullError           the run's queue holds as many messages from runs as it may (HTTP 429)
│   │   ├── ControlQueueShareError          the sending run holds its share of that queue (HTTP 429)
│   │   └── ControlQueueBytesError          its messages from runs hold as many bytes as it may (HTTP 429)
│   ├── OperatorOnlyError               a run tried what only an operator may do (HTTP 403)
│   ├── PermissionConflictError         a request id re-filed with other content (HTTP 409)
│   ├── PermissionNotFoundError         an answer to a request never filed (also LookupError; HTTP 404)
│   ├── QuotaExceededError              a run went over one of its quotas; nothing was recorded
│   │   ├── TooLargeError                   a field longer than its bound (HTTP 413)
│   │   └── TooManyError                    too many open, or too fast (HTTP 429; .retry_after)
│   ├── RunAlreadyRegisteredError       create_run or /register on an existing run (HTTP 409)
│   │   └── RunRevokedError                 the run's token was revoked: only a re-key revives it
│   ├── RunNotEnrolledError             /register of a run no operator created (also PermissionError; 403)
│   └── RunNotFoundError                no such run (also LookupError; HTTP 404)
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
├── OperatorError                   an operator credential cannot be enrolled, changed or revoked
│   ├── OperatorExistsError             the name holds an active credential (HTTP 409)
│   ├── OperatorNotFoundError           no active credential by that name (also LookupError; HTTP 404)
│   └── OperatorValidationError         a bad name, role or token (also ValueError; HTTP 400)
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
        super().__init__(f"tool override: invalid scope {_quote(scope)}")
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
        super().__init__(f"session kind mismatch: got {_quote(got)}, want {_quote(want)}")
        self.got = got
        self.want = want
        self.session_id = session_id


def _quote(text: str) -> str:
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
        super().__init__(f"approval {_quote(id)} is not pending")
        self.id = id


class ApprovalRecordingError(ApprovalError):
    """Raised when a decision arrives while the request is still being recorded."""

    sentinel = "approval request is still being recorded"

    def __init__(self, id: str) -> None:
        super().__init__(f"{self.sentinel}: {_quote(id)}")
        self.id = id


class ApprovalResolvingError(ApprovalError):
    """Raised when another writer's resolution of the same approval is in progress."""

    sentinel = "approval resolution is already in progress"

    def __init__(self, id: str) -> None:
        super().__init__(f"{self.sentinel}: {_quote(id)}")
        self.id = id


class ApprovalExpiredError(ApprovalError):
    """Raised when a decision arrives at or after the deadline; `.resolution` is the expiry."""

    sentinel = "approval expired"

    def __init__(self, resolution: Any, actor: str, decision: str) -> None:
        expires = _rfc3339nano(resolution.approval.expires_at)
        super().__init__(
            f"{self.sentinel}: approval {_quote(resolution.approval.id)} expired at {expires} "
            f"before {_quote(actor)} could submit {_quote(decision)}"
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
        super().__init__(f"approval request {_quote(id)} cancelled")
        self.id = id


class ApprovalExpireRunError(ApprovalError):
    """Raised when expiring a run's approvals met problems; `.errors` lists each one."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


class DuplicateVoteError(ApprovalError):
    """Raised when an actor approves a quorum approval it already approved."""

    def __init__(self, id: str, actor: str, why: str = "") -> None:
        super().__init__(f"approval {_quote(id)}: {why or _quote(actor) + ' has already approved'}")
        self.id = id
        self.actor = actor


class QuorumPendingError(ApprovalError):
    """Raised when an approve vote was recorded but the quorum is not reached yet."""

    def __init__(self, id: str, votes: int, needed: int) -> None:
        super().__init__(f"approval {_quote(id)}: {votes} of {needed} approvals recorded")
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


class BrokerError(ActorsError):
    """Raised when the broker refuses an operation on a run."""


class AskError(BrokerError):
    """Raised when an ask cannot be sent, answered, awaited or cancelled; `status` is its HTTP answer."""

    status = 400


class AskConflictError(AskError):
    """Raised when an ask's message id is in use by its sender, or the target is asking the sender."""

    status = 409


class AskInvalidError(AskError, ValueError):
    """Raised when an ask has no message id."""


class AskNotFoundError(AskError, LookupError):
    """Raised when the run has no pending ask with that message id."""

    status = 404

    def __init__(self, message_id: str) -> None:
        super().__init__("no pending ask for this message id")
        self.message_id = message_id


class NotAskPartyError(AskError):
    """Raised when a reply does not come from the ask's target, or a wait is not its sender's."""

    status = 403


class RunNotFoundError(BrokerError, LookupError):
    """Raised when a run is not registered; the message is the seed's `run not found: <id>`."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run not found: {run_id}")
        self.run_id = run_id


class RunAlreadyRegisteredError(BrokerError):
    """Raised when a run id is registered again without its token."""

    def __init__(self, run_id: str) -> None:
        super().__init__("run already registered")
        self.run_id = run_id


class RunRevokedError(RunAlreadyRegisteredError):
    """Raised when a run whose token was revoked registers again; an operator's re-key revives it."""

    def __init__(self, run_id: str) -> None:
        BrokerError.__init__(self, "run already registered: its token was revoked (an operator re-keys it)")
        self.run_id = run_id


class RunNotEnrolledError(BrokerError, PermissionError):
    """Raised when a registration names a run that nobody created, where only created runs register.

    On a server taking enrolled runs only, an operator or an enrolment credential creates a
    run (and gets its token) before its agent registers with that token.
    """

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} was not created by an operator or an enrolment credential")
        self.run_id = run_id


class ControlQueueFullError(BrokerError):
    """Raised when a run's queue holds as many undelivered messages from runs as it may; nothing was queued.

    Operator control is never refused for it: it has a lane of its own.
    """

    def __init__(self, run_id: str, limit: int) -> None:
        super().__init__(f"control queue of run {run_id} is full ({limit} undelivered messages)")
        self.run_id = run_id
        self.limit = limit


class ControlQueueShareError(ControlQueueFullError):
    """Raised when the sending run already holds its share of another run's queue; nothing was queued."""

    def __init__(self, run_id: str, sender: str, share: int) -> None:
        BrokerError.__init__(
            self,
            f"run {sender} holds its share of the control queue of run {run_id} ({share} undelivered "
            f"messages): wait until {run_id} takes them",
        )
        self.run_id = run_id
        self.limit = share
        self.sender = sender


class ControlQueueBytesError(ControlQueueFullError):
    """Raised when a run's queue holds as many payload bytes of messages from runs as it may; nothing
    was queued. It bounds what one run's undelivered messages hold in a server's memory."""

    def __init__(self, run_id: str, max_bytes: int) -> None:
        BrokerError.__init__(
            self,
            f"control queue of run {run_id} is full ({max_bytes} bytes of undelivered message payloads): "
            f"wait until {run_id} takes them",
        )
        self.run_id = run_id
        self.limit = max_bytes


class QuotaExceededError(BrokerError):
    """Raised when a run goes over one of its quotas (see `actors.Quotas`); nothing was recorded."""


class TooLargeError(QuotaExceededError):
    """Raised when a field a principal sent is longer than its bound (HTTP 413)."""


class TooManyError(QuotaExceededError):
    """Raised when a run has too many of something open, or writes too fast (HTTP 429).

    `retry_after` is the seconds after which trying again may succeed (None: not by waiting
    alone, something must close first).
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OperatorOnlyError(BrokerError, PermissionError):
    """Raised when a run tries what only an operator may do; nothing was queued or decided.

    A run may not send another run (or itself) a control type the operator side sends,
    nor decide an approval that needs an operator.
    """


class OperatorError(ActorsError):
    """Raised when an operator credential cannot be enrolled, changed or revoked as asked."""


class OperatorExistsError(OperatorError):
    """Raised when enrolling a name that holds an active credential."""

    def __init__(self, name: str) -> None:
        super().__init__(f"operator {_quote(name)} already has an active credential (revoke it first)")
        self.name = name


class OperatorNotFoundError(OperatorError, LookupError):
    """Raised when no active credential goes by that name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no active operator named {_quote(name)}")
        self.name = name


class OperatorValidationError(OperatorError, ValueError):
    """Raised when an operator's name, role or token is unusable; nothing is recorded."""


class PermissionConflictError(BrokerError):
    """Raised when a run files a request id it used before, with other content; nothing changes."""

    def __init__(self, run_id: str, request_id: str) -> None:
        super().__init__(
            f"permission request {_quote(request_id)} of run {_quote(run_id)} was filed before with other "
            "content: a request id names one request forever"
        )
        self.run_id = run_id
        self.request_id = request_id


class PermissionNotFoundError(BrokerError, LookupError):
    """Raised when a run answers a permission request it never filed."""

    def __init__(self, run_id: str, request_id: str) -> None:
        super().__init__(f"run {_quote(run_id)} filed no permission request {_quote(request_id)}")
        self.run_id = run_id
        self.request_id = request_id


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
