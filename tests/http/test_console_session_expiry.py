"""Console sessions expire: after their idle time, at their lifetime, and with their credential.

The session store on a clock the test moves, then `create_app` and `flightlog serve` with their
session options, over loopback.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

import pytest

from actors import System, token_digest
from tests.identity_helpers import ConsoleSession, bearer, new_db, served, strong_token
from tools.demo.background import BackgroundServer
from tools.http import app as http_app
from tools.http.console_auth import ConsoleSessions


class FakeClock:
    """Monotonic seconds that move only when the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_a_session_unused_for_its_idle_time_ends():
    clock = FakeClock()
    sessions = ConsoleSessions(idle=60, lifetime=3600, clock=clock)
    cookie, csrf = sessions.start("cred-1")
    clock.advance(59)
    assert sessions.find(cookie, csrf, need_csrf=True) == "cred-1"
    clock.advance(59)  # 118 s after login, 59 s after the last use: using it kept it alive
    assert sessions.find(cookie, csrf, need_csrf=True) == "cred-1"
    clock.advance(60.5)
    assert sessions.find(cookie, csrf, need_csrf=True) is None
    assert sessions.find(cookie, csrf, need_csrf=True) is None  # ended for good, not only refused
    assert len(sessions) == 0


def test_a_busy_session_ends_at_its_lifetime():
    clock = FakeClock()
    sessions = ConsoleSessions(idle=60, lifetime=300, clock=clock)
    cookie, csrf = sessions.start("cred-1")
    for _ in range(6):  # used every 50 s: never idle, until 300 s after login
        clock.advance(50)
        assert sessions.find(cookie, csrf, need_csrf=True) == "cred-1"
    clock.advance(1)
    assert sessions.find(cookie, csrf, need_csrf=True) is None


def test_a_session_needs_its_own_csrf_secret_and_ends_with_its_credential():
    sessions = ConsoleSessions(clock=FakeClock())
    cookie, csrf = sessions.start("cred-1")
    other_cookie, other_csrf = sessions.start("cred-2")
    assert sessions.find(cookie, None, need_csrf=True) is None
    assert sessions.find(cookie, other_csrf, need_csrf=True) is None
    assert sessions.find(cookie, None, need_csrf=False) == "cred-1"
    assert sessions.end_credential("cred-1") == 1
    assert sessions.find(cookie, csrf, need_csrf=True) is None
    assert sessions.find(other_cookie, other_csrf, need_csrf=True) == "cred-2"


@pytest.fixture
def app_clock(monkeypatch) -> FakeClock:
    """The clock of every console session store `create_app` builds from now on."""
    clock = FakeClock()
    monkeypatch.setattr(http_app, "ConsoleSessions", functools.partial(ConsoleSessions, clock=clock))
    return clock


@pytest.fixture
def app_server(tmp_path, app_clock) -> Iterator[tuple[str, str]]:
    """create_app(session_idle=60, session_lifetime=300) served on loopback: (url, bootstrap token)."""
    token = strong_token()
    with System.open(str(tmp_path / "app.db"), scheduler=False) as system:
        app = http_app.create_app(
            system, operator_token_sha256=token_digest(token), session_idle=60, session_lifetime=300
        )
        with BackgroundServer(app) as server:
            yield server.url, token


def test_create_app_ends_idle_sessions_and_old_ones(app_server, app_clock):
    url, token = app_server
    session = ConsoleSession(url, token)
    try:
        assert re.search(r"max-age=300\b", session.set_cookie.lower()), session.set_cookie
        app_clock.advance(59)
        assert session.get("/api/v1/console/me").status_code == 200
        app_clock.advance(61)
        assert session.get("/api/v1/console/me").status_code == 401
    finally:
        session.close()
    busy = ConsoleSession(url, token)
    try:
        for _ in range(6):
            app_clock.advance(50)
            assert busy.get("/api/v1/console/overview").status_code == 200
        app_clock.advance(1)
        assert busy.get("/api/v1/console/overview").status_code == 401
        # Only the session ended: the token itself still works.
        assert busy.client.get("/api/v1/me", headers=bearer(token)).status_code == 200
    finally:
        busy.close()


def test_serve_session_options_reach_the_console(tmp_path):
    db = new_db(tmp_path / "serve.db")
    bootstrap = strong_token()
    with served(db, bootstrap, "--session-idle", "90", "--session-lifetime", "5000") as server:
        session = ConsoleSession(server.url, bootstrap)
        try:
            assert re.search(r"max-age=5000\b", session.set_cookie.lower()), session.set_cookie
            assert session.get("/api/v1/console/me").json()["name"] == "bootstrap"
            assert session.post("/ui/logout").status_code == 200
            assert session.get("/api/v1/console/me").status_code == 401
        finally:
            session.close()
    assert bootstrap not in server.output()
