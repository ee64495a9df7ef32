"""The snapshot writer gives the C heap back after each round of snapshots it stores.

A round dumps every view at one mark: tens of MB of JSON that is freed once stored. glibc
keeps freed heap for reuse, so without a trim a server's RSS kept each round's peak for good
(`flightlog bench soak`: a step of 5 to 11 MiB at the 100,000-event mark that never left).
"""

from __future__ import annotations

import platform
from typing import Any

import pytest

from projections import _snapshots
from projections._snapshots import SnapshotWriter


class Store:
    def __init__(self) -> None:
        self.stored: list[Any] = []

    def put(self, snapshot: Any) -> None:
        self.stored.append(snapshot)

    def prune(self, name: str, version: int, keep: int) -> None:
        raise AssertionError("keep is None: nothing is pruned")


def test_the_heap_is_trimmed_once_per_round_after_the_dumps_are_freed():
    trims: list[int] = []
    store = Store()
    writer = SnapshotWriter(store, release=lambda: trims.append(len(store.stored)))  # type: ignore[arg-type]
    writer.IDLE = 0.01
    for round_ in range(2):
        for name in ("a", "b", "c"):
            writer.submit(name, 1, 100 * (round_ + 1), "0" * 64, [b'{"x":1}'])
        thread = writer._thread  # started by the first submit of the round
        assert thread is not None
        writer.flush()
        thread.join(10)
        assert len(trims) == round_ + 1, "one trim when the round's thread ends"
        assert trims[-1] == 3 * (round_ + 1), "after every snapshot of the round is stored"
    assert writer.error is None


def test_the_default_release_is_glibcs_trim_where_glibc_is_the_c_library():
    release = _snapshots.RELEASE_FREED
    if platform.libc_ver()[0] != "glibc":
        pytest.skip(f"not glibc ({platform.libc_ver()[0] or 'unknown'}): its allocator returns memory alone")
    assert release is not None, "on glibc the writer must trim: else each round's peak stays in RSS"
    assert release() in (0, 1)  # malloc_trim(0): 1 if memory was given back, else 0
