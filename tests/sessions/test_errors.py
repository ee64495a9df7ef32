"""The actors exception tree and the seed's error messages (seed §3.2, §3.4, §3.6)."""

import inspect
import sys

import pytest

import actors
import actors._broker_errors as broker_errors_module
import actors._errors as errors_module
from actors import (
    ActorsError,
    GroupCompactionUnsupportedError,
    InvalidBaseDirError,
    InvalidSessionRequestError,
    ProjectNotFoundError,
    SessionArchivedError,
    SessionError,
    SessionForbiddenError,
    SessionNotFoundError,
    SessionWrongKindError,
    WorkspaceSetupError,
)


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (SessionNotFoundError(), "session not found"),
        (SessionNotFoundError("0198f1c2-id"), "session not found: 0198f1c2-id"),
        (SessionForbiddenError(), "session access forbidden"),
        (SessionWrongKindError("task", "scheduler"), 'session kind mismatch: got "task", want "scheduler"'),
        (SessionWrongKindError("", "delegate"), 'session kind mismatch: got "", want "delegate"'),
        (SessionArchivedError(), "session is archived"),
        (InvalidSessionRequestError("UserID is required"), "UserID is required"),
        (InvalidSessionRequestError("AgentID is required"), "AgentID is required"),
        (GroupCompactionUnsupportedError(), "compaction is not supported for group sessions"),
        (ProjectNotFoundError(), "project not found"),
        (ProjectNotFoundError("p1"), "project not found"),  # never confirms which project
        (WorkspaceSetupError(), "failed to resolve workspace"),
        (InvalidBaseDirError("base_dir must be absolute"), "base_dir must be absolute"),
    ],
)
def test_messages(error, message):
    assert str(error) == message
    assert isinstance(error, ActorsError)


def test_session_errors_carry_their_details():
    wrong = SessionWrongKindError("task", "scheduler", session_id="s1")
    assert (wrong.got, wrong.want, wrong.session_id) == ("task", "scheduler", "s1")
    assert SessionNotFoundError("s2").session_id == "s2"
    assert SessionForbiddenError("s3").session_id == "s3"
    assert SessionArchivedError("s4").session_id == "s4"


def test_a_hostile_kind_cannot_break_the_message():
    message = str(SessionWrongKindError('chat"\nforged: yes', "task"))
    assert "\n" not in message
    assert message == 'session kind mismatch: got "chat\\"\\nforged: yes", want "task"'


@pytest.mark.parametrize(
    ("cls", "mixin"),
    [
        (SessionNotFoundError, LookupError),
        (ProjectNotFoundError, LookupError),
        (InvalidSessionRequestError, ValueError),
        (InvalidBaseDirError, ValueError),
        (actors.WorkspaceIdError, ValueError),
        (actors.InvalidToolOverrideScopeError, ValueError),
    ],
)
def test_stdlib_mixins_where_callers_expect_them(cls, mixin):
    assert issubclass(cls, mixin)


@pytest.mark.parametrize(
    "cls",
    [
        GroupCompactionUnsupportedError,
        InvalidSessionRequestError,
        SessionArchivedError,
        SessionForbiddenError,
        SessionNotFoundError,
        SessionWrongKindError,
    ],
)
def test_session_errors_share_a_parent(cls):
    assert issubclass(cls, SessionError)


def test_seed_sentinels_are_kept():
    assert InvalidBaseDirError.sentinel == "invalid base_dir"
    assert WorkspaceSetupError.sentinel == "failed to resolve workspace"
    assert str(WorkspaceSetupError("create '/x': Permission denied")) == (
        "failed to resolve workspace: create '/x': Permission denied"
    )


ERROR_CLASSES = [
    cls
    for module in (errors_module, broker_errors_module)
    for _, cls in inspect.getmembers(module, inspect.isclass)
    if issubclass(cls, BaseException) and cls.__module__ == module.__name__
]


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda cls: cls.__name__)
def test_every_error_is_rooted_documented_and_drawn(cls):
    assert issubclass(cls, ActorsError)
    assert (cls.__doc__ or "").startswith("Raised when "), f"{cls.__name__} docstring"
    tree = sys.modules[cls.__module__].__doc__ or ""  # each module draws its part of the tree
    assert cls.__name__ in tree, f"{cls.__name__} is missing from the tree"
