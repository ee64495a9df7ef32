"""Given/when/then for the approval decider: `given(events).when(command, now).then(...)`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from actors.approvals.decider import ApprovalCommand, ApprovalState, decide, evolve
from eventlog import Event


class given:  # lower case: it reads as a sentence, given(events).when(command, now).then(events)
    """The events already in an approval's stream."""

    def __init__(self, events: Sequence[Event] = (), id: str = "ap-1") -> None:
        self.events = list(events)
        self.state = fold(self.events, ApprovalState(id))

    def when(self, command: ApprovalCommand, now: datetime) -> Then:
        try:
            decision = decide(self.state, command, now)
        except Exception as e:  # a refusal before anything is recorded
            return Then(self.state, [], e)
        return Then(self.state, list(decision.events), decision.error)


class Then:
    """What the decider answered: the events to record, then the caller's error."""

    def __init__(self, state: ApprovalState, events: list[Event], error: Exception | None) -> None:
        self.before = state
        self.events = events
        self.error = error

    def then(
        self, expected: Sequence[Event] | type[Exception], error: type[Exception] | None = None
    ) -> Exception | None:
        """`then([events])`, `then([events], ErrorClass)`, or `then(ErrorClass)` for nothing recorded.

        Returns the error (for further assertions) and checks that the recorded events fold.
        """
        if isinstance(expected, type):
            expected, error = [], expected
        assert self.events == list(expected)
        if error is None:
            assert self.error is None, f"unexpected error: {self.error!r}"
        else:
            assert isinstance(self.error, error), f"expected {error.__name__}, got {self.error!r}"
        self.after = fold(self.events, self.before)
        return self.error


def fold(events: Sequence[Event], state: ApprovalState) -> ApprovalState:
    for event in events:
        state = evolve(state, event)
    return state
