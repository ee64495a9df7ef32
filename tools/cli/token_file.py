"""The bootstrap operator token of `flightlog serve`: from the environment, or kept in a 0600 file.

Without FLIGHTLOG_OPERATOR_TOKEN, serve keeps the token in a file only its user can read
(`<db>.operator-token` beside a SQLite log, `flightlog-operator-token` in the current folder
for a PostgreSQL URL, or --token-file) and prints the file's path, never the token (but once
on a terminal). A restart reads the token back, so the bootstrap credential stays the same
until the file is removed. A token file that others could read, that is another user's, that
is not a plain file or that holds no strong token is refused, never overwritten.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import sys

import click

from actors import make_token

from .._output import UsageFailure, clean
from .._tokens import MAKE_ONE, weakness

TOKEN_ENV = "FLIGHTLOG_OPERATOR_TOKEN"
MIN_TOKEN_LENGTH = 16
MAX_TOKEN_LENGTH = 512
SUFFIX = ".operator-token"
DEFAULT_NAME = "flightlog-operator-token"  # for a database that is not a file, in the current folder
PRIVATE_MODE = 0o600
_READ_AT_MOST = 4096


class TokenFileError(UsageFailure):
    """Raised when the token file cannot be used safely: one line on stderr, exit 2."""


def token_problem(token: str) -> str | None:
    """Why `token` cannot be the operator token (never quoting it), or None when it can."""
    if not all("!" <= c <= "~" for c in token) or not MIN_TOKEN_LENGTH <= len(token) <= MAX_TOKEN_LENGTH:
        return f"must be {MIN_TOKEN_LENGTH} to {MAX_TOKEN_LENGTH} printable ASCII characters without spaces"
    reason = weakness(token)
    return None if reason is None else f"is too weak: {reason}. Make one with: {MAKE_ONE}"


def default_path(db: str) -> str:
    """Where the token file of DB goes when --token-file does not say."""
    if db.startswith(("postgresql://", "postgres://")) or db == ":memory:" or db.startswith("file::memory:"):
        return DEFAULT_NAME
    return db + SUFFIX


def read_token(path: str) -> str | None:
    """The token kept at `path`, or None when there is no file; TokenFileError when it is unsafe."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _refused(path, "it is a symbolic link") from None
        raise _refused(path, f"it cannot be read ({e.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refused(path, "it is not a regular file")
        if info.st_uid != os.geteuid():
            raise _refused(path, f"it belongs to another user (uid {info.st_uid})")
        if info.st_mode & 0o077:
            raise _refused(path, f"it is not private (mode {stat.S_IMODE(info.st_mode):04o}, 0600 needed)")
        raw = os.read(fd, _READ_AT_MOST)
    finally:
        os.close(fd)
    token = raw.decode("ascii", "replace").strip()
    problem = token_problem(token)
    if problem is not None:
        raise _refused(path, f"the token in it {problem}")
    return token


def write_token(path: str, token: str) -> bool:
    """Write `token` to a new 0600 file at `path`; False when a file is there already."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, PRIVATE_MODE)
    except FileExistsError:
        return False
    except OSError as e:
        raise TokenFileError(
            f"cannot write the token file {path}: {e.strerror}; "
            f"choose another with --token-file, or set {TOKEN_ENV}"
        ) from None
    try:
        os.fchmod(fd, PRIVATE_MODE)  # the umask may have taken bits off; the owner needs to read it
        os.write(fd, token.encode("ascii") + b"\n")
        os.fsync(fd)  # a restart after a power cut finds the same token
    finally:
        os.close(fd)
    return True


def keep_new_token(path: str, token: str, *, show: bool) -> str:
    """Keep `token` at `path` and say where; the token the file holds (another server's, if one
    wrote it first). `show` also prints the token itself, once: for a terminal."""
    if not write_token(path, token):
        kept = read_token(path)
        if kept is None:  # written and removed since: nothing to trust
            raise TokenFileError(f"the token file {path} changed while serve started; start it again")
        announce(f"operator token read from {os.path.abspath(path)}")
        return kept
    announce(f"operator token written to {os.path.abspath(path)} (only you can read it)")
    if show:
        announce(f"operator token (shown once): {token}")
    return token


def announce(text: str) -> None:
    """One line on stderr, as serve's other start-up lines."""
    click.echo(f"flightlog: {clean(text)}", err=True)


def _refused(path: str, reason: str) -> TokenFileError:
    return TokenFileError(
        f"refusing the token file {path}: {reason}; remove it (serve then writes a new one) "
        f"or set {TOKEN_ENV}"
    )


def operator_token_digest(db: str, token_file: str | None) -> str | None:
    """SHA-256 of the operator token from the environment or from an existing token file; None
    when a new one is to be made (after the log opened: a refused log gets no token file)."""
    token = os.environ.get(TOKEN_ENV, "")
    if token:
        problem = token_problem(token)
        if problem is not None:
            raise UsageFailure(f"{TOKEN_ENV} {problem}")
        return hashlib.sha256(token.encode("ascii")).hexdigest()
    path = token_file or default_path(db)
    kept = read_token(path)
    if kept is None:
        return None
    announce(f"operator token read from {os.path.abspath(path)}")
    return hashlib.sha256(kept.encode("ascii")).hexdigest()


def new_operator_token_digest(db: str, token_file: str | None) -> str:
    """SHA-256 of a fresh operator token, kept in the token file (and shown once on a terminal)."""
    token = make_token()
    while token_problem(token) is not None:  # a draw of digits alone reads as weak: draw again
        token = make_token()
    kept = keep_new_token(token_file or default_path(db), token, show=sys.stderr.isatty())
    return hashlib.sha256(kept.encode("ascii")).hexdigest()
