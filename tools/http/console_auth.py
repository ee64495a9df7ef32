"""Console sessions: a cookie this server alone reads, and a secret no other program holds.

The console trades an operator's token for a session once (POST /ui/login). The browser then
holds an HttpOnly, SameSite=Strict cookie named after this server's port, and the page keeps
the session's CSRF secret, returned only in the login answer, in its origin's storage (which,
unlike a cookie, is specific to the port). Every API request authenticated by the cookie must
carry that secret in `X-Flightlog-CSRF`: a cookie sent to, or stolen by, another program on
the same host is useless without it. The server holds only SHA-256 digests of both.

A session ends at logout, after SESSION_IDLE seconds unused, SESSION_LIFETIME after login,
or as soon as its operator's credential is revoked; a bootstrap admin's session also ends when
the bootstrap token changes (the table keeps sessions across restarts, and the bootstrap
credential's id stays `bootstrap` whatever its token). An operator holds at most
SESSIONS_PER_CREDENTIAL sessions: a login beyond that ends their least recently used one, so no
operator's logins can push other operators' sessions out of the table.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from starlette.requests import Request

from actors.operators import BOOTSTRAP
from eventlog import SessionRow, SessionStore

CSRF_HEADER = "x-flightlog-csrf"
SESSION_IDLE = 30 * 60.0
SESSION_LIFETIME = 12 * 3600.0
MAX_SESSIONS = 10_000  # live sessions kept; the oldest go first beyond it
SESSIONS_PER_CREDENTIAL = 20  # an operator's own; their oldest goes first beyond it
TOUCH_EVERY = 60.0  # seconds: a session's last use is written back at most this often


def cookie_name(request: Request) -> str:
    """The session cookie's name on this server: browsers scope cookies by host, not by port."""
    server = request.scope.get("server")
    port = server[1] if server and len(server) > 1 and server[1] else 0
    return f"flightlog_session_{port}"


class _MemoryStore(SessionStore):
    """Sessions in this process alone (an app over a log with no table beside it)."""

    def __init__(self) -> None:
        self._rows: dict[str, SessionRow] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> SessionRow | None:
        with self._lock:
            return self._rows.get(key)

    def put(self, row: SessionRow, *, keep: int, keep_each: int) -> None:
        with self._lock:
            self._rows[row.key] = row
            own = [k for k, r in self._rows.items() if r.credential_id == row.credential_id]
            for k in sorted(own, key=lambda k: self._rows[k].last_used)[: max(0, len(own) - keep_each)]:
                del self._rows[k]
            while len(self._rows) > keep:
                del self._rows[min(self._rows, key=lambda k: self._rows[k].last_used)]

    def touch(self, key: str, last_used: float) -> None:
        with self._lock:
            row = self._rows.get(key)
            if row is not None:
                self._rows[key] = replace(row, last_used=last_used)

    def delete(self, key: str) -> None:
        with self._lock:
            self._rows.pop(key, None)

    def delete_credential(self, credential_id: str) -> int:
        with self._lock:
            gone = [k for k, row in self._rows.items() if row.credential_id == credential_id]
            for k in gone:
                del self._rows[k]
        return len(gone)

    def count(self) -> int:
        with self._lock:
            return len(self._rows)


class ConsoleSessions:
    """Console sessions, keyed by the SHA-256 of the cookie value.

    With a `store` beside the log (`eventlog.session_store`), every process serving that log
    knows the same sessions (`serve --workers N`, servers sharing a PostgreSQL database), and
    times are wall-clock seconds; without one they are kept in this process.

    `bootstrap_sha256` is the digest of the bootstrap token these sessions are bound to: a
    bootstrap session is kept under a tag derived from it (`bootstrap:<tag>`), and one made
    under another token is ended when next used.
    """

    def __init__(
        self,
        *,
        idle: float = SESSION_IDLE,
        lifetime: float = SESSION_LIFETIME,
        clock: Callable[[], float] | None = None,
        store: SessionStore | None = None,
        bootstrap_sha256: str = "",
    ) -> None:
        if idle <= 0 or lifetime <= 0:
            raise ValueError("session idle timeout and lifetime must be positive")
        self.idle = idle
        self.lifetime = lifetime
        # The id the table keeps for the bootstrap credential: a digest of its token's digest,
        # so that the table holds nothing that authenticates, and a new token owns no old session.
        tag = hashlib.sha256(f"flightlog console session:{bootstrap_sha256}".encode()).hexdigest()
        self._bootstrap_held = f"{BOOTSTRAP}:{tag}"
        self._clock = clock or (time.time if store is not None else time.monotonic)
        self._store = store if store is not None else _MemoryStore()
        # A use is written back at most this often: the idle timeout is kept to within it.
        self._touch_every = min(TOUCH_EVERY, idle / 10)

    def start(self, credential_id: str) -> tuple[str, str]:
        """A new session for `credential_id`: (cookie value, CSRF secret), both shown only now."""
        value, csrf = secrets.token_hex(32), secrets.token_hex(32)
        now = self._clock()
        row = SessionRow(_digest(value), self._held(credential_id), _digest(csrf), now, now)
        self._store.put(row, keep=MAX_SESSIONS, keep_each=SESSIONS_PER_CREDENTIAL)
        return value, csrf

    def end(self, value: str | None) -> None:
        if value:
            self._store.delete(_digest(value))

    def end_credential(self, credential_id: str) -> int:
        """End every session of `credential_id` (it was revoked); return how many ended."""
        return self._store.delete_credential(self._held(credential_id))

    def _held(self, credential_id: str) -> str:
        """The credential id as the table keeps it (the bootstrap's bound to its token)."""
        return self._bootstrap_held if credential_id == BOOTSTRAP else credential_id

    def _holder(self, held: str) -> str | None:
        """The credential id of a session kept under `held`; None for a bootstrap session made
        under another bootstrap token (or before sessions were bound to it)."""
        if held == BOOTSTRAP or held.startswith(f"{BOOTSTRAP}:"):
            return BOOTSTRAP if held == self._bootstrap_held else None
        return held

    def find(self, value: str | None, csrf: str | None, *, need_csrf: bool) -> str | None:
        """The credential id of a live session with this cookie (and CSRF secret), or None.

        Using a session keeps it alive for another idle period, up to its lifetime.
        """
        if not value:
            return None
        key = _digest(value)
        now = self._clock()
        session = self._store.get(key)
        if session is None:
            return None
        holder = self._holder(session.credential_id)
        if holder is None or now - session.last_used > self.idle or now - session.started > self.lifetime:
            self._store.delete(key)
            return None
        if need_csrf and not (csrf and hmac.compare_digest(_digest(csrf), session.csrf_sha256)):
            return None
        if now - session.last_used >= self._touch_every:
            self._store.touch(key, now)
        return holder

    def __len__(self) -> int:
        return self._store.count()


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
