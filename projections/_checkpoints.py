"""In-memory checkpoints: view states at regular seqs, kept as deltas, for time travel without I/O."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_MISSING = object()


@dataclass(slots=True)
class _Entry:
    seq: int
    full: bool
    rows: dict[str, dict[Any, Any]]  # view -> every row (full) or the rows changed since the last entry
    removed: dict[str, list[Any]] = field(default_factory=dict)  # view -> keys gone since the last entry

    @property
    def size(self) -> int:
        return sum(len(r) for r in self.rows.values()) + sum(len(k) for k in self.removed.values())


class Checkpoints:
    """States of dict-of-frozen-rows views at regular seqs, most of them stored as deltas.

    Checkpoints are due on a grid of `every` seqs (see `due`). Every `full_every`-th one
    holds a copy of each state (a dict copy shares its frozen rows); the ones between hold
    only the rows that changed since the checkpoint before, found by identity (a changed
    row is a new object) against a shadow of that checkpoint. Restoring one copies the full
    checkpoint before it and applies the deltas up to it. Checkpoints more than `recent` seqs
    behind the newest are kept only on a coarser grid of `coarse` seqs: the ones off it are
    merged into their successors, so a long log costs one merged delta per `coarse` seqs of its
    past (the rows that changed in them) rather than one per `every`, and time travel into the
    past folds at most `coarse` records. Checkpoints more than `horizon` seqs behind the newest
    are dropped (the oldest one kept is made full): time travel further back starts from a
    stored snapshot, so a server's checkpoints are bounded by the rows changed over its
    horizon, not by the length of its log. When the rows held still exceed `budget`, the
    grid doubles and the checkpoints off it are merged likewise. Not thread-safe: the runner
    guards it with its lock.
    """

    def __init__(
        self,
        every: int,
        budget: int,
        full_every: int = 32,
        rows_per_event: float = 4.0,
        *,
        recent: int = 0,
        coarse: int = 0,
        horizon: int = 0,
    ) -> None:
        self.every = every
        self.budget = budget
        self.recent = recent  # 0: every checkpoint stays on the fine grid
        self.coarse = coarse
        self.horizon = horizon  # 0: checkpoints are kept however old
        self.full_every = full_every
        self.rows_per_event = rows_per_event
        self._scan = 0  # rows the next checkpoint will compare: the size of the states last seen
        self._entries: list[_Entry] = []
        self._seqs: list[int] = []
        self._shadow: dict[str, dict[Any, Any]] = {}  # views compared row by row: their last checkpoint
        self._names: set[str] = set()
        self._since_full = 0
        self._size = 0
        self._first_off_grid = 0  # entries before this one are all on the coarse grid already

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """Rows and keys held over all checkpoints (the shadow not counted)."""
        return self._size

    def due(self, seq: int) -> bool:
        """Whether to take a checkpoint at `seq`: on the grid, and far enough from the last one.

        A checkpoint compares every row of the states it cannot track, so one is taken only
        once `rows / rows_per_event` seqs have passed: the cost per folded record stays
        bounded as those states grow, and the interval widens (time travel folds further).
        """
        if self.every <= 0 or seq % self.every:
            return False
        if self.rows_per_event <= 0 or not self._seqs:
            return True
        return (seq - self._seqs[-1]) * self.rows_per_event >= self._scan

    def next_after(self, seq: int) -> int:
        """The next seq after `seq` at which a checkpoint is due (a huge number when disabled)."""
        if self.every <= 0:
            return 2**62
        return (seq // self.every + 1) * self.every

    def add(
        self, seq: int, states: dict[str, dict[Any, Any]], touched: dict[str, set[Any]] | None = None
    ) -> None:
        """Record the live `states` (dicts of frozen rows) as the checkpoint at `seq`.

        `touched` may give, for some views, every key that records changed since the last
        checkpoint: their delta is read off those keys instead of comparing every row. (Such
        a view's delta comes in no particular key order, so its dump must not depend on it.)
        The sets are emptied.
        """
        if self._seqs and seq <= self._seqs[-1]:
            return
        touched = touched or {}
        fresh = not self._entries or states.keys() != self._names
        if fresh or self._since_full + 1 >= self.full_every:
            entry = _Entry(seq, True, {name: dict(state) for name, state in states.items()})
            self._shadow = {name: dict(state) for name, state in states.items() if name not in touched}
            self._names = set(states)
            self._since_full = 0
        else:
            entry = _Entry(seq, False, {}, {})
            for name, state in states.items():
                keys = touched.get(name)
                if keys is None:
                    changed, removed = _delta(self._shadow[name], state)
                else:
                    changed = {key: state[key] for key in keys if key in state}
                    removed = [key for key in keys if key not in state and self._held(name, key)]
                entry.rows[name] = changed
                if removed:
                    entry.removed[name] = removed
            self._since_full += 1
        for keys in touched.values():
            keys.clear()
        self._entries.append(entry)
        self._seqs.append(seq)
        self._size += entry.size
        self._scan = sum(len(state) for name, state in states.items() if name not in touched)
        if self.recent > 0 and self.coarse > 0:
            self._coarsen(seq - self.recent)
        if self.horizon > 0 and seq - self._seqs[0] > self.horizon:
            self._drop_before(seq - self.horizon)
        while self._size > self.budget and len(self._entries) > 2:
            self._thin()

    def _held(self, name: str, key: Any) -> bool:
        """Whether the newest checkpoint's state of view `name` holds `key`.

        Read off the entries back to the newest full one: the first to name the key decides.
        A key touched since then but gone again (a row that came and went between two
        checkpoints, or one of another view keyed by the same field) is then no removal to
        keep: without this, every such key would be kept for as long as the log's past is.
        """
        for entry in reversed(self._entries):
            if key in entry.rows.get(name, ()):
                return True
            if entry.full or key in entry.removed.get(name, ()):
                return False
        return False

    def restore(self, seq: int, name: str) -> tuple[int, dict[Any, Any]] | None:
        """A fresh copy of view `name` at the newest checkpoint at or below `seq`: `(seq, state)`."""
        i = bisect.bisect_right(self._seqs, seq) - 1
        if i < 0 or name not in self._entries[i].rows:
            return None
        first = i
        while not self._entries[first].full:
            first -= 1
        state = dict(self._entries[first].rows[name])
        for entry in self._entries[first + 1 : i + 1]:
            state.update(entry.rows[name])
            for key in entry.removed.get(name, ()):
                state.pop(key, None)
        return self._seqs[i], state

    def _coarsen(self, before: int) -> None:
        """Merge each checkpoint older than `before` that is off the coarse grid into the next one."""
        grid = max(self.coarse, self.every)
        first = self._first_off_grid
        if first >= len(self._entries) or self._entries[first].seq >= before:
            return  # nothing new has aged past `before`: most calls end here
        self._merge_off(lambda entry: entry.seq < before and entry.seq % grid != 0)
        self._first_off_grid = bisect.bisect_left(self._seqs, before)

    def _drop_before(self, oldest: int) -> None:
        """Drop the checkpoints before seq `oldest`; the first one kept becomes full."""
        i = bisect.bisect_left(self._seqs, oldest)
        if i <= 0 or i >= len(self._entries):
            return
        first = self._entries[i]
        if not first.full:
            rows = {}
            for name in first.rows:
                restored = self.restore(first.seq, name)
                rows[name] = restored[1] if restored is not None else {}
            self._entries[i] = first = _Entry(first.seq, True, rows)
        self._keep(self._entries[i:])
        self._first_off_grid = max(0, self._first_off_grid - i)

    def _thin(self) -> None:
        """Double the interval: merge each checkpoint off the new grid into the next one."""
        self.every *= 2
        self._merge_off(lambda entry: entry.seq % self.every != 0)
        self._first_off_grid = 0

    def _merge_off(self, off: Callable[[_Entry], bool]) -> None:
        """Merge every checkpoint but the newest for which `off` holds into its successor."""
        kept: list[_Entry] = []
        carry: _Entry | None = None
        last = len(self._entries) - 1
        for i, entry in enumerate(self._entries):
            if carry is not None:
                entry = _merge(carry, entry)
                carry = None
            if i != last and off(entry):
                carry = entry
                continue
            kept.append(entry)
        self._keep(kept)

    def _keep(self, entries: list[_Entry]) -> None:
        """Make `entries` (the first one full) the checkpoints held, and their counts follow."""
        self._entries = entries
        self._seqs = [e.seq for e in entries]
        self._size = sum(e.size for e in entries)
        fulls = [i for i, e in enumerate(entries) if e.full]
        self._since_full = len(entries) - 1 - fulls[-1]


def _delta(shadow: dict[Any, Any], state: dict[Any, Any]) -> tuple[dict[Any, Any], list[Any]]:
    """The rows of `state` that are not in `shadow` (by identity), and the keys it lost; updates `shadow`.

    The shadow is kept in the state's key order, so while no key was removed the state is the
    shadow's keys followed by new ones. Then rows are compared a block at a time by list
    comparison, in C: identical rows compare equal at once, so an unchanged block costs a few
    pointer comparisons, and only a block that differs is looked at row by row. (A row
    replaced by an equal one is not recorded: restoring gives an equal row.)
    """
    n = len(shadow)
    if n <= len(state):
        keys = list(state)
        if keys[:n] == list(shadow):
            rows, old = list(state.values()), list(shadow.values())
            changed = {}
            for lo in range(0, n, _BLOCK):
                hi = min(lo + _BLOCK, n)
                if rows[lo:hi] != old[lo:hi]:
                    for i in range(lo, hi):
                        if rows[i] is not old[i]:
                            changed[keys[i]] = rows[i]
            for i in range(n, len(keys)):
                changed[keys[i]] = rows[i]
            shadow.update(changed)
            return changed, []
    get = shadow.get
    changed = {key: row for key, row in state.items() if get(key, _MISSING) is not row}
    removed = [key for key in shadow if key not in state]
    shadow.clear()
    shadow.update(state)  # back in the state's key order
    return changed, removed


_BLOCK = 64


def _merge(older: _Entry, newer: _Entry) -> _Entry:
    """One entry standing for `older` followed by `newer` (at `newer`'s seq)."""
    if newer.full:
        return newer
    rows: dict[str, dict[Any, Any]] = {}
    removed: dict[str, list[Any]] = {}
    for name, base in older.rows.items():
        gone = newer.removed.get(name, [])
        merged = dict(base)
        merged.update(newer.rows[name])
        for key in gone:
            merged.pop(key, None)
        rows[name] = merged
        if older.full:
            continue
        fresh = newer.rows[name]
        still_gone = [k for k in older.removed.get(name, ()) if k not in fresh and k not in gone]
        if still_gone or gone:
            removed[name] = still_gone + list(gone)
    return _Entry(newer.seq, older.full, rows, removed)
