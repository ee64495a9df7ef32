"""Given/when/then for the agent deciders: `given(events).when(command).then(events)`.

One helper serves the session, project and tool-override deciders: each test module binds
it to its decider with `Scenario(decide, evolve, initial)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from eventlog import Event

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Scenario:
    """A decider under test: `scenario.given(events, id=...)` starts a sentence."""

    def __init__(
        self,
        decide: Callable[[Any, Any, datetime], Any],
        evolve: Callable[[Any, Event], Any],
        initial: Callable[[str], Any],
        id: str = "s-1",
    ) -> None:
        self.decide = decide
        self.evolve = evolve
        self.initial = initial
        self.id = id

    def given(self, events: Sequence[Event] = (), id: str | None = None) -> Given:
        return Given(self, list(events), id or self.id)


class Given:
    """The events already in the aggregate's stream."""

    def __init__(self, scenario: Scenario, events: list[Event], id: str) -> None:
        self.scenario = scenario
        self.state = fold(scenario, events, scenario.initial(id))

    def when(self, command: Any, now: datetime = T0) -> Then:
        try:
            decision = self.scenario.decide(self.state, command, now)
        except Exception as e:  # a refusal before anything is decided
            return Then(self.scenario, self.state, [], e)
        return Then(self.scenario, self.state, list(decision.events), decision.error)


class Then:
    """What the decider answered: the events to record, then the caller's error."""

    def __init__(self, scenario: Scenario, state: Any, events: list[Event], error: Exception | None) -> None:
        self.scenario = scenario
        self.before = state
        self.events = events
        self.error = error
        self.after = state

    def then(
        self, expected: Sequence[Event] | type[Exception], error: type[Exception] | None = None
    ) -> Exception | None:
        """`then([events])`, `then([events], ErrorClass)`, or `then(ErrorClass)` for nothing recorded.

        Returns the error (for further assertions); `self.after` is the state the events fold to.
        """
        if isinstance(expected, type):
            expected, error = [], expected
        assert self.events == list(expected)
        if error is None:
            assert self.error is None, f"unexpected error: {self.error!r}"
        else:
            assert isinstance(self.error, error), f"expected {error.__name__}, got {self.error!r}"
        self.after = fold(self.scenario, self.events, self.before)
        return self.error


def fold(scenario: Scenario, events: Sequence[Event], state: Any) -> Any:
    for event in events:
        state = scenario.evolve(state, event)
    return state
