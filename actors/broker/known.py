"""The runs' latest known states, shared by the run actors and the hot path's writer.

A run's actor and the writer (`writer.RunWriter`) both append to the run's stream; each
publishes the state and version it reached here, and each adopts a later one it finds here
instead of reading the log. An entry is only ever behind the log, never ahead of it: the
log's version check (`expect=`) turns a decision on a stale entry into a ConcurrencyError and
a fold. A commit of another process marks the entry stale (`follower`), so that nothing is
answered from it without folding first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from .run_decider import RunState


@dataclass(frozen=True, slots=True)
class Known:
    """A run's state at `version`; `fresh` False once another process appended past it."""

    state: RunState
    version: int
    fresh: bool = True


class KnownRuns:
    """Run id → its latest known state; thread-safe, bounded by the runs in use (`expire`)."""

    def __init__(self) -> None:
        self._runs: dict[str, Known] = {}
        self._used: dict[str, datetime] = {}
        self._lock = threading.Lock()
        # Run id -> the version a write of the writer takes it to, from just before its append
        # until its state is published: the follower may read the commit meanwhile.
        self._writing: dict[str, int] = {}

    def get(self, run_id: str) -> Known | None:
        return self._runs.get(run_id)

    def version(self, run_id: str) -> int:
        """The version reached, or being reached by a write of this process (0: not known)."""
        known = self._runs.get(run_id)
        return max(known.version if known is not None else 0, self._writing.get(run_id, 0))

    def writing(self, run_id: str, version: int | None) -> None:
        """Note (or, with None, forget) the version a write of the writer takes the run to."""
        with self._lock:
            if version is None:
                self._writing.pop(run_id, None)
            else:
                self._writing[run_id] = version

    def publish(self, run_id: str, state: RunState, version: int, used: datetime | None = None) -> None:
        """Record `state` at `version` unless a later one is known; `used` notes a use at that time."""
        with self._lock:
            known = self._runs.get(run_id)
            if known is None or known.version < version or (known.version == version and not known.fresh):
                self._runs[run_id] = Known(state, version)
            if used is not None:
                self._used[run_id] = used

    def stale(self, run_id: str) -> None:
        """Another process appended to the run: its entry must be folded forward before use."""
        with self._lock:
            known = self._runs.get(run_id)
            if known is not None and known.fresh:
                self._runs[run_id] = Known(known.state, known.version, fresh=False)

    def expire(self, idle_since: datetime | None, keep: Callable[[str], bool]) -> int:
        """Drop the entries unused since `idle_since` (all without it) unless `keep(id)`; how many."""
        with self._lock:
            gone = [
                id
                for id in self._runs
                if (idle_since is None or self._used.get(id, idle_since) <= idle_since)
                and id not in self._writing
                and not keep(id)
            ]
            for id in gone:
                del self._runs[id]
                self._used.pop(id, None)
        return len(gone)

    def __len__(self) -> int:
        return len(self._runs)
