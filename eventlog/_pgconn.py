"""PostgreSQL connections: a safe URL for messages, error translation, a reader pool, a listener."""

from __future__ import annotations

import contextlib
import os
import select
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

import psycopg
from psycopg import sql

from ._errors import CorruptDatabaseError, DiskFullError, ReadOnlyDatabaseError, StorageError

Conn = psycopg.Connection[tuple[Any, ...]]

# SQLSTATEs (PostgreSQL appendix A) that map onto the eventlog's typed storage errors.
_DISK_FULL = {"53100"}  # disk_full
READ_ONLY_STATES = frozenset({"25006", "42501"})  # read_only_sql_transaction, insufficient_privilege
_CORRUPT = {"XX001", "XX002"}  # data_corrupted, index_corrupted
_IDLE = psycopg.pq.TransactionStatus.IDLE


def redact(url: str) -> str:
    """The URL without its password, fit for messages and reprs."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = f"{userinfo.split(':', 1)[0]}@{host}"
    query = "&".join(p for p in parts.query.split("&") if not p.startswith("password="))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def secrets_of(url: str) -> list[str]:
    """The passwords a URL carries, to scrub from driver messages."""
    parts = urlsplit(url)
    found = [parts.password] if parts.password else []
    found += [v for k, v in parse_qsl(parts.query) if k == "password" and v]
    return sorted({form for secret in found for form in (secret, unquote(secret))}, key=len, reverse=True)


class Connector:
    """Opens connections to one URL and turns driver errors into StorageError without secrets."""

    def __init__(self, url: str) -> None:
        self._url = url
        self.safe_url = redact(url)
        self._secrets = secrets_of(url)

    def connect(self) -> Conn:
        try:
            return psycopg.connect(self._url, autocommit=True)
        except psycopg.Error as e:
            raise StorageError(self.safe_url, f"cannot connect: {self._scrub(str(e))}") from None

    def translate(self, exc: psycopg.Error) -> StorageError:
        """The typed StorageError for a driver error, carrying the safe URL and the cause."""
        state = exc.sqlstate or ""
        message = self._scrub(str(exc).strip())
        if state in _DISK_FULL:
            return DiskFullError(self.safe_url, f"disk is full; nothing was written: {message}")
        if state in READ_ONLY_STATES:
            return ReadOnlyDatabaseError(self.safe_url, f"database is read-only: {message}")
        if state in _CORRUPT:
            return CorruptDatabaseError(self.safe_url, f"database is corrupt: {message}")
        if isinstance(exc, psycopg.OperationalError) and not state:
            return StorageError(self.safe_url, f"connection lost: {message}")
        return StorageError(self.safe_url, message)

    def _scrub(self, message: str) -> str:
        for secret in self._secrets:
            message = message.replace(secret, "***")
        return message


def usable(conn: Conn) -> bool:
    """Whether an idle connection may still be used, checked without a round trip.

    The server says nothing to an idle connection that does not LISTEN unless it is dropping
    it (a restart, pg_terminate_backend, idle_session_timeout): then its last words, or the
    end of the stream, wait unread in the socket. Using such a connection would fail the
    caller's statement, although a new connection would have served it.
    """
    if conn.closed or conn.broken:
        return False
    try:
        poller = select.poll()  # not select.select: that refuses descriptors past FD_SETSIZE
        poller.register(conn.fileno(), select.POLLIN)
        return not poller.poll(0)
    except (OSError, psycopg.Error):
        return False


class ReaderPool:
    """At most `size` autocommit connections shared by reading threads; each query is one snapshot."""

    def __init__(self, connector: Connector, size: int = 8) -> None:
        self._connector = connector
        self._slots = threading.BoundedSemaphore(size)
        self._lock = threading.Lock()
        self._idle: list[Conn] = []
        self._closed = False

    @contextlib.contextmanager
    def connection(self) -> Iterator[Conn]:
        with self._slots:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is not None and not usable(conn):
                conn.close()
                conn = None
            if conn is None:
                conn = self._connector.connect()
            try:
                yield conn
            finally:
                with self._lock:
                    if self._closed or conn.closed or conn.info.transaction_status != _IDLE:
                        conn.close()
                    else:
                        self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class Listener:
    """A thread that LISTENs on one channel and calls `wake` on every notification.

    It also calls `wake` whenever it (re)starts listening, since a commit may have slipped
    in while it was not. A dropped connection is retried until `stop`.
    """

    def __init__(self, connector: Connector, channel: str, wake: Callable[[], None]) -> None:
        self._connector = connector
        self._channel = channel
        self._wake = wake
        self._stopping = threading.Event()
        self._signal_r, self._signal_w = os.pipe()
        self.listening = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"listen {channel}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stopping.set()
        os.write(self._signal_w, b"x")
        self._thread.join(timeout)
        if not self._thread.is_alive():
            os.close(self._signal_r)
            os.close(self._signal_w)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._listen()
            except (psycopg.Error, StorageError, OSError):
                self.listening.clear()
                self._wake()
                self._stopping.wait(0.5)  # the server went away: retry, followers still poll

    def _listen(self) -> None:
        with self._connector.connect() as conn:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
            self.listening.set()
            self._wake()
            while not self._stopping.is_set():
                ready, _, _ = select.select([conn.fileno(), self._signal_r], [], [])
                if self._signal_r in ready:
                    return
                if list(conn.notifies(timeout=0)):
                    self._wake()
