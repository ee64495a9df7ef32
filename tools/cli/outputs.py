"""Files a command writes: never the log it reads, and never half-written.

An output path that is the log itself, its `-wal`, `-shm` or `-journal`, or another name of
the same file (a hard link, a symlink) is refused before anything is opened: writing there
destroys the log. Everything else is written to a temporary file beside the target, made
0600, and renamed over it once complete, so a reader never sees a half-written file and a
failure leaves the old one as it was.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

import click

from .._private import PRIVATE_MODE

LOG_SUFFIXES = ("", "-wal", "-shm", "-journal")


def log_files(db: str) -> list[str]:
    """The files a SQLite log at `db` is made of (none for a PostgreSQL URL or `:memory:`)."""
    if db.startswith(("postgresql://", "postgres://")) or db == ":memory:":
        return []
    return [db + suffix for suffix in LOG_SUFFIXES]


def is_log_file(path: str, db: str) -> bool:
    """Whether writing `path` would write the log at `db`: the same name, or the same inode."""
    target = os.path.realpath(path)
    for part in log_files(db):
        if target == os.path.realpath(part):
            return True
        with contextlib.suppress(OSError):
            if os.path.samefile(path, part):
                return True
    return False


def refuse_log_file(path: str | None, db: str | None, option: str) -> None:
    """A usage error (nothing written) if `path` is the log at `db` or one of its files."""
    if path is not None and db is not None and is_log_file(path, db):
        raise click.BadParameter(
            f"{path}: that is the database being exported (the log, its -wal or -shm, or another name "
            "of the same file); choose another file",
            param_hint=option,
        )


@contextlib.contextmanager
def replaced(path: str, *, copy: bool = False) -> Iterator[str]:
    """A temporary path beside `path`, renamed over it when the block ends without an error.

    The temporary file is 0600, or the mode `path` already has; with `copy`, it starts as a
    copy of `path` (a SQLite file whose other tables are kept). An error removes it and
    leaves `path` as it was.
    """
    folder = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        mode = PRIVATE_MODE
        with contextlib.suppress(FileNotFoundError):
            mode = stat.S_IMODE(os.stat(path).st_mode)
            if copy:
                with open(path, "rb") as source, os.fdopen(os.dup(fd), "wb") as sink:
                    shutil.copyfileobj(source, sink)
        os.fchmod(fd, mode)
        os.close(fd)
        fd = -1
        yield temp
        os.replace(temp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


@contextlib.contextmanager
def written(path: str) -> Iterator[BinaryIO]:
    """`path` written through a temporary file (see `replaced`): a binary file to write to."""
    with replaced(path) as temp, open(temp, "wb") as sink:
        yield sink
