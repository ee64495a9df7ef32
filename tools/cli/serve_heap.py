"""What `flightlog serve` does to its own process's memory before it serves: the allocator's
arenas, and the start-up heap kept out of the garbage collector's sight."""

from __future__ import annotations

import ctypes
import gc

# glibc's malloc arenas a server may use. By default a process with many threads gets up to
# 8 per core, each holding its own freed memory: in `flightlog bench soak` (200,000 events,
# 40 runs, ~50 threads) two arenas ended 3.9 MiB lower (67.8 against 71.7 MiB RSS) and grew
# 0.17 MiB per 10k events instead of 0.19. The threads take turns at the GIL anyway.
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number for it (glibc's malloc.h)


def settle_heap() -> None:
    """Move everything alive now (modules, the app, the log's views as caught up) out of the
    garbage collector's sight.

    A full collection walks every tracked object: with the server's start-up heap in view,
    each took 60-120 ms in `bench soak`'s thousand long polls (35-70 ms without it), the
    event loop stalled meanwhile and polls were answered that much late. Frozen objects are
    still freed by their reference counts; only cycles among them stay.
    """
    gc.collect()
    gc.freeze()


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Have glibc's malloc use at most `arenas` arenas from now on; False where there is no glibc.

    Call it before the server starts its threads: arenas made already stay.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # musl, macOS, Windows: another allocator
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, arenas))
