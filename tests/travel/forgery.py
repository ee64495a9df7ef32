"""The forged-snapshot attack: a log with a rejected approval, and a snapshot that says approved."""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
import zlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from eventlog import EventLog, Snapshot, snapshot_store
from eventlog.events import ApprovalDecided, ApprovalPublished, ApprovalRequested
from projections import Views
from projections._snapshots import make_snapshot

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
    """Snapshots of every view at the head: the live ones as `flightlog replay` stores them, and
    the approval history as versions of flightlog that kept it live stored it (a log may still
    hold such snapshots, and `verify` checks them)."""
    views = Views(log)
    seq = views.catch_up()
    views.runner.write_snapshots()
    views.runner.flush()
    history = views.view("approval_history")
    head = log.head()
    snapshot_store(log).put(make_snapshot(history, views.state("approval_history"), seq, head.hash, log.seal))


def forge_approval_history(log: EventLog) -> Snapshot:
    """Rewrite the newest approval_history snapshot: every reject becomes an approve by FORGER,
    recompressed and stored with a fresh (unkeyed) digest, as whoever can write the file could."""

    def forge(rows: list[dict[str, object]]) -> list[dict[str, object]]:
        for row in rows:
            if row["decision"] == "reject":
                row["status"] = row["decision"] = "approve"
                row["actor"] = FORGER
        return rows

    return _forge(log, "approval_history", forge)


def forge_approval_actors(log: EventLog) -> Snapshot:
    """Rewrite the newest approval_actors snapshot (a live view's): every actor becomes FORGER."""

    def forge(state: dict[str, list[list[object]]]) -> dict[str, list[list[object]]]:
        state["actors"] = [[run_id, [FORGER]] for run_id, _ in state["actors"]]
        return state

    return _forge(log, "approval_actors", forge)


def _forge(log: EventLog, name: str, forge: Callable[[Any], Any]) -> Snapshot:
    store = snapshot_store(log)
    listed = [s for s in store.list(name) if not s.pruned]
    real = store.get(name, listed[-1].version, listed[-1].seq)
    assert real is not None
    assert real.data is not None
    content = orjson.dumps(forge(orjson.loads(zlib.decompress(real.data))))
    digest = hashlib.sha256(content).hexdigest()
    forged = dataclasses.replace(real, digest=digest, size=len(content), data=zlib.compress(content))
    store.put(forged)
    return forged
