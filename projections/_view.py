"""The View protocol: a named, versioned, pure fold over records."""

from __future__ import annotations

from typing import Any, Protocol

from eventlog import Record


class View(Protocol):
    """A read model: `initial()` and `apply(state, record) -> state`, with no clock, I/O or randomness.

    `types` names the record types the view reads; the runner hands it only those. A view may
    update its state in place for speed (a fold owns its state), but must give the same
    result for the same records in any process: no dependence on set order, ids of objects,
    or the time of folding. `version` changes whenever the fold's meaning changes.
    """

    name: str
    version: int
    types: frozenset[str]

    def initial(self) -> Any: ...

    def apply(self, state: Any, record: Record) -> Any: ...

    def copy(self, state: Any) -> Any:
        """A copy of `state` that later applies cannot change (for snapshots and time travel)."""
        ...

    def dump(self, state: Any) -> Any:
        """The state as plain JSON-able data, in a deterministic order."""
        ...
