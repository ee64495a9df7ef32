"""A snapshot and the store interface every backend's snapshot store implements."""

from __future__ import annotations

import abc
import builtins
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A value named `name` at `version`, as of the log's `seq` (whose chain hash is `hash`).

    `digest` is the SHA-256 of `data` and outlives it: a pruned snapshot keeps its digest,
    so a later replay can still be compared with it. `data` is None when pruned, or when
    the snapshot came from a listing. `mac` seals name, version, seq, hash and digest with
    the log's key ("" on an unkeyed log, or from code that did not seal).
    """

    name: str
    version: int
    seq: int
    hash: str
    digest: str
    size: int
    data: bytes | None = None
    pruned: bool = False
    mac: str = ""


@dataclass(frozen=True, slots=True)
class RunCheckpointRow:
    """A per-run checkpoint as stored: where it sits in `stream` (its `version`, the log's `seq`
    and chain hash there), what it holds (`data`, a few small fields) and the `mac` sealing it."""

    stream: str
    version: int
    seq: int
    hash: str
    data: bytes
    mac: str = ""


class SnapshotStore(abc.ABC):
    """Where snapshots of one log live. Thread-safe."""

    readonly: bool = False

    @abc.abstractmethod
    def put(self, snapshot: Snapshot) -> None:
        """Store `snapshot`, replacing one with the same name, version and seq."""

    @abc.abstractmethod
    def get(self, name: str, version: int, seq: int) -> Snapshot | None:
        """The snapshot with its data, or None if absent or pruned."""

    @abc.abstractmethod
    def nearest(self, name: str, version: int, at_or_below: int | None = None) -> Snapshot | None:
        """The newest snapshot that still has its data, at or below `at_or_below` if given."""

    @abc.abstractmethod
    def list(self, name: str | None = None) -> list[Snapshot]:
        """Every snapshot (without data), by name, version and seq."""

    @abc.abstractmethod
    def prune(self, name: str, version: int, keep: int) -> int:
        """Drop the data of all but the newest `keep` snapshots, keeping their digests."""

    @abc.abstractmethod
    def delete(self, name: str | None = None, after_seq: int | None = None) -> int:
        """Delete snapshots (of `name`, above `after_seq` when given); returns how many."""

    def run_checkpoints(self, stream: str) -> builtins.list[RunCheckpointRow]:
        """The stored checkpoints of one stream, by version (none where the store keeps none)."""
        return []

    def put_run_checkpoints(self, rows: builtins.list[RunCheckpointRow]) -> None:  # noqa: B027 - optional
        """Store per-run checkpoints, replacing any at the same stream and version (a cache: a
        store that keeps none drops them)."""
