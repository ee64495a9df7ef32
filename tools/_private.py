"""Files flightlog writes for its user alone: created 0600 whatever the umask.

An export or a dump holds what the log holds (run data, approval previews), so a file the
CLI creates is readable by its owner only. A file that is there already keeps the mode its
owner gave it: it is written to, never chmod-ed.
"""

from __future__ import annotations

import os
from typing import BinaryIO

PRIVATE_MODE = 0o600
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC


def open_private(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened to be written from its start: created 0600 if missing, else truncated as it is."""
    try:
        fd = os.open(path, _CREATE, PRIVATE_MODE)
    except FileExistsError:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)
    else:
        _exact_mode(fd)
    return os.fdopen(fd, "wb")


def create_private(path: str | os.PathLike[str]) -> bool:
    """Create `path` as an empty 0600 file unless something is there; True if it made it."""
    try:
        fd = os.open(path, _CREATE, PRIVATE_MODE)
    except FileExistsError:
        return False
    _exact_mode(fd)
    os.close(fd)
    return True


def _exact_mode(fd: int) -> None:
    try:
        os.fchmod(fd, PRIVATE_MODE)  # the umask may have taken bits off (0o400 under 0o277)
    except BaseException:
        os.close(fd)
        raise
