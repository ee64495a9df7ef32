"""Checking every stored snapshot of a log: what `flightlog verify` and the server's verdict report.

A reader trusts a snapshot only if it passes `snapshot_fault` (on this chain, content matching
its digest, and on a keyed log a valid MAC). On a keyed log that is proof: nobody without the
key can seal a snapshot, so checking is cheap. On an unkeyed log it is not: whoever can write
the file can store a consistent forgery, so each snapshot is re-derived from the log (one fold
from seq 0 to the newest snapshot, as `replay_check` does) and one whose content differs is
reported as forged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eventlog import EventLog, EventLogError, SnapshotStore

from ._replay import Progress, replay_check
from ._snapshots import AUTO, hash_at, resolve_store, snapshot_fault
from ._view import View


@dataclass(frozen=True, slots=True)
class BadSnapshot:
    """A stored snapshot that readers must not trust, and why."""

    view: str
    version: int
    seq: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"view": self.view, "version": self.version, "seq": self.seq, "reason": self.reason}

    def __str__(self) -> str:
        return f"snapshot {self.view} v{self.version} @{self.seq}: {self.reason}"


@dataclass(frozen=True, slots=True)
class SnapshotCheck:
    """The outcome of checking a log's snapshots: how, how many, and those that failed."""

    method: str  # "mac" (keyed log), "re-derived" (unkeyed log), "none" (no snapshot store)
    checked: int
    bad: list[BadSnapshot] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.bad

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "method": self.method, "checked": self.checked,
                "bad": [b.to_dict() for b in self.bad]}  # fmt: skip

    def summary(self) -> str:
        """One line for people: what was checked and what failed."""
        how = {"mac": "checked by their MAC", "re-derived": "re-derived from the log"}.get(self.method, "")
        if self.method == "none":
            return "no snapshots to check (this backend stores none)"
        if self.ok:
            return f"{self.checked} view snapshot(s) {how}: ok"
        return f"{len(self.bad)} of {self.checked} view snapshot(s) {how} FAILED: " + "; ".join(
            map(str, self.bad)
        )


def check_snapshots(
    log: EventLog,
    views: Sequence[View],
    *,
    store: SnapshotStore | None = AUTO,
    progress: Progress | None = None,
) -> SnapshotCheck:
    """Check every stored snapshot of `views` (of their current versions) that readers would use.

    Snapshots of another history (their chain hash is not the log's) or of another version
    are never used by readers, so they are not judged here. Cost: on a keyed log, reading
    each snapshot once; on an unkeyed log, that plus one fold of every view from seq 0 to
    the head (about what `flightlog replay` costs).
    """
    found = resolve_store(log, store)
    if found is None:
        return SnapshotCheck("none", 0)
    by_name = {v.name: v for v in views}
    bad: list[BadSnapshot] = []
    checked = 0
    for listed in found.list():
        view = by_name.get(listed.name)
        if view is None or listed.version != view.version:
            continue
        chain_hash = hash_at(log, listed.seq)
        if chain_hash != listed.hash:
            continue
        try:
            full = found.get(listed.name, listed.version, listed.seq) if not listed.pruned else None
        except EventLogError as e:
            bad.append(BadSnapshot(listed.name, listed.version, listed.seq, f"unreadable: {e}"))
            continue
        checked += 1
        fault = snapshot_fault(log, full or listed, chain_hash)
        if fault:
            bad.append(BadSnapshot(listed.name, listed.version, listed.seq, fault))
    if log.keyed:
        return SnapshotCheck("mac", checked, bad)
    if not checked:
        return SnapshotCheck("re-derived", 0)  # nothing a reader would use: nothing to fold
    known = {(b.view, b.seq) for b in bad}
    report = replay_check(log, views, store=found, progress=progress)
    for m in report.mismatches:
        if (m.view, m.seq) not in known:
            reason = (
                "its content differs from what the log folds to (forged, or this code reads the log "
                "differently)"
            )
            bad.append(BadSnapshot(m.view, by_name[m.view].version, m.seq, reason))
    return SnapshotCheck("re-derived", checked, bad)
