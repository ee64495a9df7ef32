"""The forged-snapshot attack: a log with a rejected approval, and a snapshot that says approved."""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
import zlib
from datetime import UTC, datetime, timedelta

import orjson

from eventlog import EventLog, Snapshot, snapshot_store
from eventlog.events import ApprovalDecided, ApprovalPublished, ApprovalRequested
from projections import Views

FORGER = "forged-op"


def record_rejection(log: EventLog, run_id: str = "run-1") -> str:
    """An approval requested, published and rejected by an operator; returns its id."""
    id = str(uuid.uuid4())
    now = datetime(2026, 1, 1, tzinfo=UTC)
    requested = ApprovalRequested(
        id, run_id, "call-1", "shell", "rm -rf /srv", "delete the service", "high", "ab" * 32,
        False, 1, now, now + timedelta(seconds=300), "agent",
    )  # fmt: skip
    decided = ApprovalDecided(id, "reject", "alice", "console", now + timedelta(seconds=5))
    log.append(f"approval-{id}", [requested, ApprovalPublished(id, now), decided], expect=0)
    return id


def store_snapshots(log: EventLog) -> None:
    """Snapshots of every view at the head, as `flightlog replay` stores them."""
    views = Views(log)
    views.catch_up()
    views.runner.write_snapshots()
    views.runner.flush()


def forge_approval_history(log: EventLog) -> Snapshot:
    """Rewrite the newest approval_history snapshot: every reject becomes an approve by FORGER,
    recompressed and stored with a fresh (unkeyed) digest, as whoever can write the file could."""
    store = snapshot_store(log)
    listed = [s for s in store.list("approval_history") if not s.pruned]
    real = store.get("approval_history", listed[-1].version, listed[-1].seq)
    assert real is not None
    assert real.data is not None
    rows = orjson.loads(zlib.decompress(real.data))
    for row in rows:
        if row["decision"] == "reject":
            row["status"] = row["decision"] = "approve"
            row["actor"] = FORGER
    content = orjson.dumps(rows)
    digest = hashlib.sha256(content).hexdigest()
    forged = dataclasses.replace(real, digest=digest, size=len(content), data=zlib.compress(content))
    store.put(forged)
    return forged
