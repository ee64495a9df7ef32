"""View snapshots: a view's canonical dump stored with its seq, version and digest, and loaded back."""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import hmac
import queue
import threading
import zlib
from collections.abc import Callable
from typing import Any

import orjson

from eventlog import EventLog, EventLogError, Snapshot, SnapshotStore, SnapshotsUnsupported, snapshot_store

from ._view import View, dump_chunks

AUTO: Any = "auto"  # let the runner find the log's own store (none for backends without one)

Seal = Callable[[bytes], "str | None"]  # EventLog.seal: a MAC under the log's key, None unkeyed


def resolve_store(log: EventLog, store: SnapshotStore | None) -> SnapshotStore | None:
    """The store to use: the given one, the log's own for AUTO, None if the backend has none."""
    if store is not AUTO:
        return store
    try:
        return snapshot_store(log)
    except SnapshotsUnsupported:
        return None


def make_snapshot(view: View, state: Any, seq: int, chain_hash: str, seal: Seal | None = None) -> Snapshot:
    """The snapshot of `state` (folded up to `seq`, whose record hash is `chain_hash`).

    The digest is of the canonical JSON; the stored data is that JSON zlib-compressed
    (level 1: about a fifth of the size, faster to write than the bytes it saves). `seal`
    (the log's `seal`) adds the MAC that makes it trusted on a keyed log.
    """
    return pack(view.name, view.version, seq, chain_hash, list(dump_chunks(view, state)), seal)


def sealed_message(name: str, version: int, seq: int, chain_hash: str, digest: str) -> bytes:
    """What a snapshot's MAC covers: the view, its version, its chain position and its content digest."""
    return orjson.dumps(["flightlog snapshot", name, version, seq, chain_hash, digest])


def snapshot_fault(log: EventLog, snapshot: Snapshot, chain_hash: str | None = None) -> str:
    """Why `snapshot` must not be trusted by `log`'s readers, or "" if it may be.

    It must sit on this log's chain (its hash is the chain hash at its seq), its content
    must match its digest, and on a keyed log its MAC must seal all of that. A pruned one
    is judged by what it keeps (position and MAC). On an unkeyed log a snapshot cannot be
    authenticated: whoever can write the file can write a consistent one, which only
    re-deriving it from the log shows (`check_snapshots`).
    """
    at = hash_at(log, snapshot.seq) if chain_hash is None else chain_hash
    if at != snapshot.hash:
        return "taken of another history (its chain hash is not the log's at its seq)"
    if snapshot.data is not None:
        try:
            content = snapshot_json(snapshot)
        except zlib.error:
            return "its data is not a snapshot (it does not decompress)"
        if hashlib.sha256(content).hexdigest() != snapshot.digest:
            return "its content does not match its digest"
    if log.keyed:
        s = snapshot
        expected = log.seal(sealed_message(s.name, s.version, s.seq, s.hash, s.digest))
        if not snapshot.mac:
            return "it carries no MAC, and this log is keyed"
        if expected is None or not hmac.compare_digest(expected, snapshot.mac):
            return "its MAC does not match (forged, or sealed with another key)"
    return ""


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


Rejected = dict[tuple[str, int, int], str]  # (view, version, seq) -> why it was not trusted


def newest_valid(
    log: EventLog,
    store: SnapshotStore,
    view: View,
    at_or_below: int | None = None,
    tries: int = 3,
    rejected: Rejected | None = None,
) -> Snapshot | None:
    """The newest snapshot of `view` at or below a seq that passes `snapshot_fault`, if any.

    One that fails (of some other history, altered, forged) is skipped, noted in `rejected`
    with the reason, and an older one tried; one already in `rejected` is skipped unread.
    """
    limit = at_or_below
    for _ in range(tries):
        try:
            snap = store.nearest(view.name, view.version, limit)
        except EventLogError:
            return None
        if snap is None:
            return None
        key = (snap.name, snap.version, snap.seq)
        fault = rejected.get(key, "") if rejected is not None else ""
        if not fault and snap.data is not None:
            try:  # decompressed once: checked, then loaded from the same bytes
                snap = dataclasses.replace(snap, data=snapshot_json(snap))
            except zlib.error:
                fault = "its data is not a snapshot (it does not decompress)"
        fault = fault or snapshot_fault(log, snap)
        if not fault:
            return snap
        if rejected is not None:
            rejected[key] = fault
        limit = snap.seq - 1
    return None


def pack(
    name: str, version: int, seq: int, chain_hash: str, chunks: list[bytes], seal: Seal | None = None
) -> Snapshot:
    """The snapshot of canonical JSON given in pieces: digest of the JSON, data zlib-compressed,
    sealed with `seal` when given (and the log is keyed)."""
    digest = hashlib.sha256()
    packer = zlib.compressobj(1)
    packed = []
    size = 0
    for chunk in chunks:
        digest.update(chunk)
        size += len(chunk)
        packed.append(packer.compress(chunk))
    packed.append(packer.flush())
    hexdigest = digest.hexdigest()
    mac = (seal(sealed_message(name, version, seq, chain_hash, hexdigest)) if seal else None) or ""
    return Snapshot(name, version, seq, chain_hash, hexdigest, size, b"".join(packed), mac=mac)


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's `malloc_trim(0)`: give freed heap pages back to the OS; None without glibc."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # musl, macOS, Windows: their allocators return memory alone
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


# Called after each round of snapshots. A round dumps every view at one mark (tens of MB of
# JSON for a large log); glibc keeps the freed heap for reuse, so a server's RSS kept each
# round's peak for good: in `bench soak`, a 5-11 MiB step at the 100,000-event mark.
RELEASE_FREED = _malloc_trim()


class SnapshotWriter:
    """Stores snapshots from a thread of its own, so that folding goes on meanwhile.

    The folding thread dumps the state (that needs the state, so it happens there); this
    thread hashes, compresses and writes it, all of which release the GIL. Up to `QUEUE`
    dumps wait to be written (about a round of views at one mark), which bounds the memory
    held. The thread ends after a second without work and starts again with the next
    snapshot. `flush()` waits until everything handed over is stored; `error` keeps the
    first failure, after which nothing more is stored.
    """

    IDLE = 1.0  # seconds without work after which the thread ends
    QUEUE = 16

    def __init__(
        self,
        store: SnapshotStore,
        keep: int | None = None,
        seal: Seal | None = None,
        release: Callable[[], object] | None = RELEASE_FREED,
    ) -> None:
        self.store = store
        self.release = release  # called when a round's thread ends, its dumps freed
        self.keep = keep
        self.seal = seal
        self.error: EventLogError | None = None
        self._queue: queue.Queue[tuple[str, int, int, str, list[bytes]]] = queue.Queue(maxsize=self.QUEUE)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, name: str, version: int, seq: int, chain_hash: str, chunks: list[bytes]) -> None:
        self._queue.put((name, version, seq, chain_hash, chunks))
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="flightlog-snapshots", daemon=True)
                self._thread.start()

    def flush(self) -> None:
        self._queue.join()

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self.IDLE)
            except queue.Empty:
                with self._lock:
                    if not self._queue.empty():
                        continue
                    self._thread = None
                if self.release is not None:
                    self.release()
                return
            try:
                if self.error is None:
                    name, version = item[0], item[1]
                    self.store.put(pack(*item, seal=self.seal))
                    if self.keep is not None:
                        self.store.prune(name, version, self.keep)
            except EventLogError as e:  # a cache that cannot be written must not stop the views
                self.error = e
            finally:
                item = None  # type: ignore[assignment]  # the dump is freed before the round ends
                self._queue.task_done()
