"""Replay checks: rebuild every view with today's code and compare with what was recorded.

Two references: the digests stored with each snapshot (what the code of that day made of
the log), and golden fixtures (expected dumps kept next to a small log). Any difference is
reported with a readable diff, so a code change that reads old history differently shows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import orjson

from eventlog import EventLog, EventLogError, Snapshot, SnapshotStore

from ._bulk import bulk
from ._diff import text_diff
from ._runner import ViewRunner
from ._snapshots import AUTO, hash_at, resolve_store, snapshot_json
from ._view import View, canonical, digest_of, state_digest

Progress = Callable[[int, int], object]  # (seq reached, head)


@dataclass(frozen=True, slots=True)
class Mismatch:
    """A view whose rebuilt dump differs from the reference at `seq`."""

    view: str
    seq: int
    expected: str
    actual: str
    diff: str

    def to_dict(self) -> dict[str, Any]:
        return {"view": self.view, "seq": self.seq, "expected": self.expected, "actual": self.actual,
                "diff": self.diff}  # fmt: skip


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """The outcome of a replay check: what was compared, what was skipped, what differs."""

    head: int
    compared: dict[str, int]  # view -> how many references it was compared with
    mismatches: list[Mismatch] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    digests: dict[str, str] = field(default_factory=dict)  # each view's digest at the head

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def total(self) -> int:
        return sum(self.compared.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "head": self.head,
            "compared": self.compared,
            "mismatches": [m.to_dict() for m in self.mismatches],
            "skipped": self.skipped,
            "digests": self.digests,
        }


def replay_check(
    log: EventLog,
    views: Sequence[View],
    *,
    store: SnapshotStore | None = AUTO,
    progress: Progress | None = None,
) -> ReplayReport:
    """Rebuild `views` from seq 0 and compare each with every digest stored for its version.

    Snapshots of another version of a view, or of another history (their chain hash does
    not match the log), are listed as skipped: they are not comparable.
    """
    by_name = {v.name: v for v in views}
    found = resolve_store(log, store)
    stored: list[Snapshot] = found.list() if found is not None else []
    skipped: list[str] = []
    due: dict[int, list[Snapshot]] = {}
    other_versions: dict[tuple[str, int], int] = {}
    for snap in stored:
        view = by_name.get(snap.name)
        if view is None or snap.version != view.version:
            key = (snap.name, snap.version)
            other_versions[key] = other_versions.get(key, 0) + 1
            continue
        due.setdefault(snap.seq, []).append(snap)
    for (name, version), count in sorted(other_versions.items()):
        now = f"v{by_name[name].version}" if name in by_name else "not in this code"
        skipped.append(f"{count} snapshot(s) of {name} v{version} (the code has {now})")
    head = log.head().seq
    compared = {v.name: 0 for v in views}
    mismatches: list[Mismatch] = []
    runner = ViewRunner(log, views, snapshots=None)
    with bulk():
        for seq in sorted(s for s in due if s <= head):
            _fold_to(runner, seq, head, progress)
            chain_hash = hash_at(log, seq)
            for snap in due[seq]:
                if snap.hash != chain_hash:
                    skipped.append(f"{snap.name} @{seq}: taken of another history (chain hash differs)")
                    continue
                compared[snap.name] += 1
                view = by_name[snap.name]
                actual = runner.read_state(snap.name, partial(state_digest, view))
                if actual != snap.digest:
                    diff = _stored_diff(found, snap, view, runner)
                    mismatches.append(Mismatch(snap.name, seq, snap.digest, actual, diff))
        _fold_to(runner, head, head, progress)
    digests = {v.name: runner.read_state(v.name, partial(state_digest, v)) for v in views}
    return ReplayReport(head, compared, mismatches, skipped, digests)


def compare_expected(
    log: EventLog,
    views: Sequence[View],
    expected: dict[str, Any],
    *,
    progress: Progress | None = None,
) -> ReplayReport:
    """Rebuild `views` to the head and compare each dump with `expected[view]` (golden fixtures)."""
    head = log.head().seq
    runner = ViewRunner(log, views, snapshots=None)
    with bulk():
        _fold_to(runner, head, head, progress)
    compared = {v.name: 0 for v in views}
    mismatches: list[Mismatch] = []
    skipped = [f"{name}: a golden dump but no such view in this code" for name in sorted(expected)
               if name not in compared]  # fmt: skip
    digests = {}
    for view in views:
        actual = canonical(runner.read_state(view.name, view.dump))
        digests[view.name] = digest_of(actual)
        if view.name not in expected:
            skipped.append(f"{view.name}: no golden dump to compare with")
            continue
        compared[view.name] += 1
        want = canonical(expected[view.name])
        if want != actual:
            diff = text_diff(expected[view.name], orjson.loads(actual))
            mismatches.append(Mismatch(view.name, head, digest_of(want), digests[view.name], diff))
    return ReplayReport(head, compared, mismatches, skipped, digests)


def _fold_to(runner: ViewRunner, seq: int, head: int, progress: Progress | None) -> None:
    step = 50_000
    while runner.checkpoint < seq:
        before = runner.checkpoint
        runner.feed(runner.log.read_all(after_seq=before, to_seq=min(seq, before + step)))
        if progress is not None:
            progress(runner.checkpoint, head)
        if runner.checkpoint == before:
            return  # the log ends before `seq`


def _stored_diff(store: SnapshotStore | None, snap: Snapshot, view: View, runner: ViewRunner) -> str:
    """A readable diff between the stored dump and the rebuilt one, when the data was kept."""
    try:
        full = store.get(snap.name, snap.version, snap.seq) if store is not None else None
    except EventLogError:
        full = None
    if full is None or full.data is None:
        return "(only the digest was kept with this snapshot: no diff to show)"
    expected = orjson.loads(snapshot_json(full))
    actual = runner.read_state(snap.name, lambda state: orjson.loads(canonical(view.dump(state))))
    return text_diff(expected, actual, labels=(f"stored @{snap.seq}", "rebuilt"))
