"""Where the client's settings come from: its arguments first, then the environment."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ._errors import ConfigurationError

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX
    fcntl = None  # type: ignore[assignment]

DEFAULT_URL = "http://127.0.0.1:8080"  # where `flightlog serve` listens by default
URL_VAR = "FLIGHTLOG_URL"
RUN_ID_VAR = "FLIGHTLOG_RUN_ID"
RUN_TOKEN_VAR = "FLIGHTLOG_RUN_TOKEN"
TOKEN_VAR = "FLIGHTLOG_TOKEN"  # an enrolment (or operator) credential that may create runs
TOKEN_DIR_VAR = "FLIGHTLOG_TOKEN_DIR"


@dataclass(frozen=True, slots=True)
class Settings:
    """A client's resolved settings."""

    url: str
    token: str  # the enrolment credential ("" for none)
    run_id: str  # the default run ("" for none)
    run_token: str  # the default run's token ("" for none)
    token_dir: Path | None  # where run tokens are kept between processes (None: nowhere)

    @classmethod
    def resolve(
        cls,
        url: str | None,
        token: str | None,
        run_id: str | None,
        run_token: str | None,
        token_dir: str | os.PathLike[str] | None,
    ) -> Settings:
        env = os.environ
        url = (url or env.get(URL_VAR) or DEFAULT_URL).rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"the flightlog URL must start with http:// or https://, not {url!r}")
        directory = token_dir if token_dir is not None else env.get(TOKEN_DIR_VAR) or None
        return cls(
            url=url,
            token=token if token is not None else env.get(TOKEN_VAR, ""),
            run_id=run_id if run_id is not None else env.get(RUN_ID_VAR, ""),
            run_token=run_token if run_token is not None else env.get(RUN_TOKEN_VAR, ""),
            token_dir=Path(directory) if directory else None,
        )

    def run_token_for(self, run_id: str) -> str:
        """The token configured for `run_id`: the environment's run token names the default run only."""
        if self.run_token and (not self.run_id or self.run_id == run_id):
            return self.run_token
        return ""


class TokenStore:
    """Run tokens kept in files (0600) between processes: a restarted agent resumes its run.

    One file per server and run; `claim(run_id)` holds an exclusive lock on the run's file,
    so parallel processes of one run register it once and share its token.
    """

    def __init__(self, directory: Path, url: str) -> None:
        self.directory = directory / hashlib.sha256(url.encode()).hexdigest()[:16]

    def _path(self, run_id: str) -> Path:
        return self.directory / f"{hashlib.sha256(run_id.encode()).hexdigest()[:32]}.token"

    def get(self, run_id: str) -> str:
        try:
            return self._path(run_id).read_text().strip()
        except OSError:
            return ""

    def put(self, run_id: str, token: str) -> None:
        path = self._path(run_id)
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        temporary = path.with_suffix(".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token)
        os.replace(temporary, path)

    def forget(self, run_id: str) -> None:
        with contextlib.suppress(OSError):
            self._path(run_id).unlink()

    @contextlib.contextmanager
    def claim(self, run_id: str) -> Iterator[None]:
        """Hold the run's lock (between processes) while it is registered and its token kept."""
        fd = self.lock(run_id)
        try:
            yield
        finally:
            self.unlock(fd)

    def lock(self, run_id: str) -> int:
        """Take the run's lock, blocking until it is free; the descriptor that `unlock` releases."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self._path(run_id).with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        if fcntl is not None:  # without advisory locks (Windows) parallel first registrations may race
            fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def unlock(self, fd: int) -> None:
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
