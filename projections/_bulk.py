"""Bulk folding: the cyclic garbage collector is paused while many records are folded."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def bulk() -> Iterator[None]:
    """Pause the cyclic GC for the duration (nested and cross-thread safe).

    A fold allocates a few short-lived containers per record (the record, its data dict)
    and keeps many long-lived rows: the collector's passes over that growing heap cost
    about as much as the fold itself, and find nothing, since views build no cycles.
    Reference counting still frees everything as usual; the collector resumes afterwards.
    """
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
