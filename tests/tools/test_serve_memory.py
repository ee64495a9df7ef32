"""`flightlog serve`'s memory settings: glibc's malloc arenas, the collector's view of the heap."""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys

import pytest

from tools.cli.serve import settle_heap

# A child process: optionally limit the arenas, then have threads allocate at once outside
# the GIL (zlib does), and print glibc's malloc_stats (one "Arena N:" line per arena, stderr).
CHILD = """
import ctypes, sys, threading, zlib
from tools.cli.serve import limit_malloc_arenas
if sys.argv[1] != "0":
    assert limit_malloc_arenas(int(sys.argv[1]))
data = bytes(range(256)) * 4096
def work():
    for _ in range(40):
        zlib.compress(data, 9)
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
ctypes.CDLL(None).malloc_stats()
"""


def arenas(limit: int) -> int:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(limit)], capture_output=True, text=True, check=True
    )
    return sum(1 for line in done.stderr.splitlines() if line.startswith("Arena "))


def glibc() -> bool:
    """Whether this process's C library is glibc (it has malloc_stats), without changing its malloc."""
    try:
        return hasattr(ctypes.CDLL(None), "malloc_stats")
    except OSError:
        return False


@pytest.mark.skipif(not glibc(), reason="needs glibc")
def test_threads_allocating_at_once_share_the_arenas_allowed():
    assert arenas(0) > 2  # glibc's default: a thread that finds an arena busy makes another
    assert arenas(2) <= 2
    assert arenas(1) == 1


def test_serve_limits_the_arenas_before_anything_else(monkeypatch, tmp_path):
    from tools.cli import serve

    called: list[int] = []

    def limited(arenas: int = serve.MALLOC_ARENAS) -> bool:
        called.append(arenas)
        raise SystemExit(9)  # stop serve here: nothing is opened yet

    monkeypatch.setattr(serve, "limit_malloc_arenas", limited)
    with pytest.raises(SystemExit):
        serve.serve_cmd.callback(**serve_defaults(str(tmp_path / "x.db")))
    assert called == [serve.MALLOC_ARENAS]
    assert not (tmp_path / "x.db").exists()


def serve_defaults(db: str) -> dict[str, object]:
    from tools.cli import serve

    params = serve.serve_cmd.params
    values: dict[str, object] = {p.name: p.default for p in params if p.name and p.expose_value}
    values["db"] = db
    return values


def test_the_heap_at_start_up_is_out_of_the_collectors_sight():
    before = gc.get_freeze_count()
    try:
        settle_heap()
        assert gc.get_freeze_count() > before  # everything alive now is frozen
    finally:
        gc.unfreeze()
