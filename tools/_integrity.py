"""What was verified of a log: its chain, its records against the event catalogue and its
snapshots, as one verdict for people and scripts.

`flightlog verify` and `audit` print it; `flightlog serve` computes it before it starts, refuses
a log whose chain is broken or that holds records off the catalogue (unless told to serve it
anyway) and then shows the tamper line on every answer (`tools.http`'s `Flightlog-Tamper`
header), in the console and in its start-up log. A record off the catalogue with an intact chain was written
past flightlog (a crafted import, a hand edit that recomputed the hashes) or by a newer
flightlog: either way every view leaves it out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eventlog import (
    CatalogueCheck,
    EventLog,
    EventLogError,
    Head,
    VerifyResult,
    check_catalogue,
    snapshot_store,
)
from projections import SnapshotCheck, check_snapshots, default_views

Progress = Callable[[int, int], object]  # (done, total)


@dataclass(frozen=True, slots=True)
class Integrity:
    """The chain's verification, the records' check against the catalogue and, when the chain
    holds, the snapshots' (None: not checked)."""

    chain: VerifyResult
    snapshots: SnapshotCheck | None = None
    catalogue: CatalogueCheck | None = None

    @property
    def ok(self) -> bool:
        return (
            self.chain.ok
            and (self.snapshots is None or self.snapshots.ok)
            and (self.catalogue is None or self.catalogue.ok)
        )

    @property
    def refused(self) -> bool:
        """Whether `flightlog serve` refuses the log unless told to serve it anyway."""
        return not self.chain.ok or (self.catalogue is not None and not self.catalogue.ok)

    def tamper(self) -> str:
        """One line saying what is wrong, or "" when nothing is."""
        if not self.chain.ok:
            return f"the hash chain breaks at seq {self.chain.first_bad_seq}: {self.chain.reason}"
        if self.catalogue is not None and not self.catalogue.ok:
            return self.catalogue.summary()
        if self.snapshots is not None and not self.snapshots.ok:
            bad = self.snapshots.bad
            return f"{len(bad)} view snapshot(s) failed verification and were not trusted: " + "; ".join(
                map(str, bad)
            )
        return ""

    def to_dict(self) -> dict[str, Any]:
        """The chain's fields as `/api/v1/verify` always had them, `ok` for both, and `snapshots`."""
        r = self.chain
        return {
            "ok": self.ok,
            "chain_ok": r.ok,
            "checked": r.checked,
            "first_bad_seq": r.first_bad_seq,
            "reason": r.reason,
            "head": None if r.head is None else {"seq": r.head.seq, "hash": r.head.hash},
            "snapshots": None if self.snapshots is None else self.snapshots.to_dict(),
            "catalogue": None if self.catalogue is None else self.catalogue.to_dict(),
        }


def check_log(
    log: EventLog,
    anchor: Head | None = None,
    *,
    snapshots: bool = True,
    catalogue: bool = True,
    chain_progress: Callable[[int], object] | None = None,
    snapshot_progress: Progress | None = None,
    catalogue_progress: Callable[[int], object] | None = None,
) -> Integrity:
    """Verify the chain, then (if `catalogue`) check every record against the event catalogue
    and, if the chain holds and `snapshots`, every stored view snapshot."""
    chain = log.verify(anchor, progress=chain_progress)
    fits = check_catalogue(log.read_all(), progress=catalogue_progress) if catalogue else None
    if not chain.ok or not snapshots:
        return Integrity(chain, catalogue=fits)
    return Integrity(chain, check_snapshots(log, default_views(), progress=snapshot_progress), fits)


def drop_untrusted(log: EventLog, check: SnapshotCheck) -> int:
    """Delete the snapshots `check` found bad (and later ones of the same views, derived from
    them), so that nothing loads them and the runner stores them anew; returns how many."""
    if check.ok:
        return 0
    try:
        store = snapshot_store(log)
    except EventLogError:
        return 0
    first: dict[str, int] = {}
    for bad in check.bad:
        first[bad.view] = min(first.get(bad.view, bad.seq), bad.seq)
    return sum(store.delete(view, after_seq=seq - 1) for view, seq in first.items())
