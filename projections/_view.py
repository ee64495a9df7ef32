"""The View protocol: a named, versioned, pure fold over records; and its canonical dump."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import orjson

from eventlog import Record


class View(Protocol):
    """A read model: `initial()` and `apply(state, record) -> state`, with no clock, I/O or randomness.

    `types` names the record types the view reads; the runner hands it only those. A view may
    update its state in place for speed (a fold owns its state), but must give the same
    result for the same records in any process: no dependence on set order, ids of objects,
    or the time of folding. `version` changes whenever the fold's meaning or the shape of
    its dump changes: snapshots of another version are never loaded.
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
        """The whole state as plain JSON-able data, in a deterministic order."""
        ...

    def load(self, data: Any) -> Any:
        """The state that `dump` described (as JSON decodes it): folding on from it is exact."""
        ...

    # Optional: `dump_chunks(state) -> Iterator[bytes]`, the canonical JSON of the dump in
    # pieces, for views whose state is too large to dump at once (see `dump_chunks` below);
    # and `row_key: str`, for a dict-of-rows view whose every record changes (adds, replaces
    # or removes) at most the row keyed by that field of its data, and whose dump does not
    # depend on its dict's order: in-memory checkpoints then note keys instead of comparing rows.


def canonical(value: Any) -> bytes:
    """Canonical JSON bytes: orjson with sorted keys (datetimes as RFC 3339)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def digest_of(data: bytes) -> str:
    """The SHA-256 of canonical bytes, as lowercase hex."""
    return hashlib.sha256(data).hexdigest()


def dump_chunks(view: View, state: Any) -> Iterator[bytes]:
    """`canonical(view.dump(state))`, in pieces if the view can make them (`dump_chunks`)."""
    pieces: Callable[[Any], Iterator[bytes]] | None = getattr(view, "dump_chunks", None)
    if pieces is not None:
        return pieces(state)
    return iter((canonical(view.dump(state)),))


def state_digest(view: View, state: Any) -> str:
    """The digest of a view state: SHA-256 of the canonical JSON of `view.dump(state)`."""
    h = hashlib.sha256()
    for chunk in dump_chunks(view, state):
        h.update(chunk)
    return h.hexdigest()
