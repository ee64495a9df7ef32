"""The broker's and the operators' exceptions: what a run or an operator credential is refused.

ActorsError (`actors._errors`)
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
├── OperatorError                   an operator credential cannot be enrolled, changed or revoked
│   ├── OperatorExistsError             the name holds an active credential (HTTP 409)
│   ├── OperatorNotFoundError           no active credential by that name (also LookupError; HTTP 404)
│   └── OperatorValidationError         a bad name, role or token (also ValueError; HTTP 400)
"""

from __future__ import annotations

from ._errors import ActorsError, quoted


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
        super().__init__(f"operator {quoted(name)} already has an active credential (revoke it first)")
        self.name = name


class OperatorNotFoundError(OperatorError, LookupError):
    """Raised when no active credential goes by that name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no active operator named {quoted(name)}")
        self.name = name


class OperatorValidationError(OperatorError, ValueError):
    """Raised when an operator's name, role or token is unusable; nothing is recorded."""


class PermissionConflictError(BrokerError):
    """Raised when a run files a request id it used before, with other content; nothing changes."""

    def __init__(self, run_id: str, request_id: str) -> None:
        super().__init__(
            f"permission request {quoted(request_id)} of run {quoted(run_id)} was filed before with other "
            "content: a request id names one request forever"
        )
        self.run_id = run_id
        self.request_id = request_id


class PermissionNotFoundError(BrokerError, LookupError):
    """Raised when a run answers a permission request it never filed."""

    def __init__(self, run_id: str, request_id: str) -> None:
        super().__init__(f"run {quoted(run_id)} filed no permission request {quoted(request_id)}")
        self.run_id = run_id
        self.request_id = request_id
