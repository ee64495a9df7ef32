"""View snapshots: a view's canonical dump stored with its seq, version and digest, and loaded back."""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

import orjson

from eventlog import EventLog, EventLogError, Snapshot, SnapshotStore, SnapshotsUnsupported, snapshot_store

from ._view import View, dump_chunks

AUTO: Any = "auto"  # let the runner find the log's own store (none for backends without one)


def resolve_store(log: EventLog, store: SnapshotStore | None) -> SnapshotStore | None:
    """The store to use: the given one, the log's own for AUTO, None if the backend has none."""
    if store is not AUTO:
        return store
    try:
        return snapshot_store(log)
    except SnapshotsUnsupported:
        return None


def make_snapshot(view: View, state: Any, seq: int, chain_hash: str) -> Snapshot:
    """The snapshot of `state` (folded up to `seq`, whose record hash is `chain_hash`).

    The digest is of the canonical JSON; the stored data is that JSON zlib-compressed
    (level 1: about a fifth of the size, faster to write than the bytes it saves).
    """
    digest = hashlib.sha256()
    packer = zlib.compressobj(1)
    packed = []
    size = 0
    for chunk in dump_chunks(view, state):
        digest.update(chunk)
        size += len(chunk)
        packed.append(packer.compress(chunk))
    packed.append(packer.flush())
    return Snapshot(view.name, view.version, seq, chain_hash, digest.hexdigest(), size, b"".join(packed))


def snapshot_json(snapshot: Snapshot) -> bytes:
    """The canonical JSON a snapshot holds (it must have its data)."""
    data = snapshot.data
    if data is None:
        raise ValueError(f"snapshot {snapshot.name} v{snapshot.version} @{snapshot.seq} has no data")
    return data if data[:1] in (b"[", b"{") else zlib.decompress(data)


def load_snapshot(view: View, snapshot: Snapshot) -> Any:
    """The state a snapshot holds (it must have its data)."""
    return view.load(orjson.loads(snapshot_json(snapshot)))


def hash_at(log: EventLog, seq: int) -> str | None:
    """The chain hash of the record at `seq`, or None past the head."""
    for record in log.read_all(after_seq=seq - 1, to_seq=seq):
        return record.hash
    return None


def newest_valid(
    log: EventLog, store: SnapshotStore, view: View, at_or_below: int | None = None, tries: int = 3
) -> Snapshot | None:
    """The newest snapshot of `view` at or below a seq whose hash matches the log, if any.

    A snapshot whose hash does not match was taken of some other history (a restored or
    rewritten file): it is skipped, and an older one tried.
    """
    limit = at_or_below
    for _ in range(tries):
        try:
            snap = store.nearest(view.name, view.version, limit)
        except EventLogError:
            return None
        if snap is None:
            return None
        if hash_at(log, snap.seq) == snap.hash:
            return snap
        limit = snap.seq - 1
    return None
