"""The console's sessions in a real headless Chromium against a real `flightlog serve`.

A session cookie that the browser sends to another program on the same host (browsers scope
cookies by host, not port) cannot be replayed there, and a form on another port cannot log the
operator out; two operators approve a two-person approval from two browsers, each with their
own token, and the page never takes a name from anyone but the server.

Skips with a reason when Playwright or Chromium is missing, unless FLIGHTLOG_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from tests.identity_helpers import (
    enrol,
    history_row,
    new_db,
    pending_ids,
    seed_quorum_approvals,
    served,
    strong_token,
)

CHROMIUM = os.environ.get("FLIGHTLOG_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT = 10.0

REQUIRED = os.environ.get("FLIGHTLOG_REQUIRE_SERVICES") == "1"  # .ci/run: a missing browser fails
try:
    from playwright import sync_api
except ImportError:
    if REQUIRED:
        raise
    pytest.skip("Playwright for Python is not installed (pip install playwright)", allow_module_level=True)
if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
    if REQUIRED:
        raise RuntimeError(f"no Chromium at {CHROMIUM}, and FLIGHTLOG_REQUIRE_SERVICES=1")
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)


# -- another program on the same host ----------------------------------------------------------


@dataclass
class Neighbour:
    """A plain HTTP server on another loopback port that records what browsers send it."""

    flightlog_url: str
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    url: str = ""

    def page(self, path: str) -> bytes:
        if path == "/logout-form":
            # Submitted as soon as it loads, as a page an operator is lured to would.
            return (
                f'<!doctype html><form method="post" action="{self.flightlog_url}/ui/logout">'
                '<input type="hidden" name="x" value="1"></form>'
                "<script>document.forms[0].submit()</script>"
            ).encode()
        return b"<!doctype html><title>weekly report</title><p>Nothing to see here.</p>"

    def wait_for(self, path: str) -> dict[str, str]:
        """The headers of the first request for `path`, once it has arrived."""
        with self.arrived:
            found = self.arrived.wait_for(
                lambda: next((h for _, p, h in self.requests if p == path), None), timeout=TIMEOUT
            )
        assert found is not None, f"the neighbour never saw {path}: {self.requests}"
        return found


@pytest.fixture
def neighbour_of() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(flightlog_url: str) -> Neighbour:
        neighbour = Neighbour(flightlog_url)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with neighbour.arrived:
                    neighbour.requests.append(
                        ("GET", self.path, {k.lower(): v for k, v in self.headers.items()})
                    )
                    neighbour.arrived.notify_all()
                body = neighbour.page(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        neighbour.url = f"http://127.0.0.1:{server.server_address[1]}"
        return neighbour

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


# -- the browser and the console ---------------------------------------------------------------


@pytest.fixture
def browser() -> Iterator[Any]:
    sync_api.expect.set_options(timeout=20_000)  # a live refresh on a busy machine takes a while
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
            sync_api.expect.set_options(timeout=None)


def new_page(browser: Any) -> Any:
    """A page in a context of its own: another browser, as far as cookies and storage go."""
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(20_000)
    return page


def log_in(page: Any, url: str, token: str, name: str, role: str) -> None:
    page.goto(f"{url}/ui/")
    page.fill("#login-token", token)
    page.click("#login-form button[type=submit]")
    sync_api.expect(page.locator("#who")).to_have_text(f"signed in as {name} ({role})")


def approve_in_console(page: Any, approval_id: str) -> None:
    card = page.locator(f"#approvals li[data-approval-id='{approval_id}']")
    card.locator("button.approve").click()
    page.locator("#confirm-ok").click()


@dataclass
class Console:
    """A served database with enrolled approvers and one pending two-person approval."""

    url: str
    port: str
    bootstrap: str
    tokens: dict[str, str]
    approval: str
    server: Any


@pytest.fixture
def console(tmp_path) -> Iterator[Console]:
    db = new_db(tmp_path / "console.db")
    tokens = {name: enrol(db, name, "approver") for name in ("alice", "bob")}
    (approval,) = seed_quorum_approvals(db, "Deploy web")
    bootstrap = strong_token()
    with served(db, bootstrap) as server:
        port = server.url.rsplit(":", 1)[1]
        yield Console(server.url, port, bootstrap, tokens, approval, server)


# -- 3. a session is not borrowable ------------------------------------------------------------


def test_a_session_cookie_sent_to_another_port_cannot_be_replayed(console, browser, neighbour_of):
    neighbour = neighbour_of(console.url)
    page = new_page(browser)
    log_in(page, console.url, console.tokens["alice"], "alice", "approver")
    page.locator(f"#approvals li[data-approval-id='{console.approval}']").wait_for()

    # The operator follows a link to another program on the same host.
    page.goto(f"{neighbour.url}/report")
    headers = neighbour.wait_for("/report")
    name = f"flightlog_session_{console.port}"
    cookies = dict(part.strip().split("=", 1) for part in headers.get("cookie", "").split(";") if "=" in part)
    # It proves the point only if the browser did hand the cookie over (same host, other port).
    assert name in cookies, f"the browser did not send the session cookie to the other port: {headers}"
    stolen = {"Cookie": f"{name}={cookies[name]}"}

    with httpx.Client(base_url=console.url, timeout=30) as attacker:
        assert attacker.get("/api/v1/console/overview", headers=stolen).status_code == 401
        assert (
            attacker.get("/api/v1/console/me", headers={**stolen, "X-Flightlog-Request": "1"}).status_code
            == 401
        )
        for extra in ({}, {"X-Flightlog-Request": "1"}, {"X-Flightlog-CSRF": "guessed"}):
            decided = attacker.post(
                f"/api/v1/approvals/{console.approval}/approve",
                json={},
                headers={**stolen, "Content-Type": "application/json", **extra},
            )
            assert decided.status_code in (401, 403), decided.text
        assert attacker.post("/ui/logout", headers={**stolen, "X-Flightlog-Request": "1"}).status_code == 403

    row = history_row(console.server, console.bootstrap, console.approval)
    assert (row["status"], row["votes"], row["refused"]) == ("pending", [], [])
    # The operator's own session is untouched.
    page.goto(f"{console.url}/ui/")
    sync_api.expect(page.locator("#who")).to_have_text("signed in as alice (approver)")


def test_a_form_on_another_port_cannot_log_the_operator_out(console, browser, neighbour_of):
    neighbour = neighbour_of(console.url)
    page = new_page(browser)
    log_in(page, console.url, console.tokens["alice"], "alice", "approver")
    page.locator(f"#approvals li[data-approval-id='{console.approval}']").wait_for()

    with page.expect_response(lambda r: r.url.endswith("/ui/logout")) as answer:
        page.goto(f"{neighbour.url}/logout-form")
    assert answer.value.status == 403
    # The browser did send the cookie with that cross-port POST: only the missing secret stopped it.
    sent = answer.value.request.all_headers()
    assert f"flightlog_session_{console.port}=" in sent.get("cookie", ""), sent

    page.goto(f"{console.url}/ui/")
    page.reload()
    sync_api.expect(page.locator("#who")).to_have_text("signed in as alice (approver)")
    page.locator(f"#approvals li[data-approval-id='{console.approval}']").wait_for()
    assert page.locator("#login").is_hidden()


# -- 4. two operators, two browsers ------------------------------------------------------------


def test_two_operators_approve_from_two_browsers_each_with_their_own_token(console, browser):
    alice = new_page(browser)
    alice.goto(f"{console.url}/ui/?as=bob")
    # The login asks for a token and nothing else, and the URL fills in nothing.
    assert alice.locator("#login-name").count() == 0
    assert alice.locator("#login-form input").count() == 1
    assert alice.input_value("#login-token") == ""
    assert "bob" not in alice.locator("#login").inner_text()
    alice.fill("#login-token", console.tokens["alice"])
    alice.click("#login-form button[type=submit]")
    sync_api.expect(alice.locator("#who")).to_have_text("signed in as alice (approver)")

    card = f"#approvals li[data-approval-id='{console.approval}']"
    sync_api.expect(alice.locator(f"{card} .quorum")).to_contain_text("0 of 2 approvals")
    approve_in_console(alice, console.approval)
    sync_api.expect(alice.locator(f"{card} .you-voted")).to_contain_text("You (alice) voted")
    sync_api.expect(alice.locator(f"{card} .quorum")).to_contain_text("1 of 2 approvals")
    assert alice.locator(f"{card} button.approve").count() == 0
    assert console.approval in pending_ids(console.server, console.bootstrap)

    bob = new_page(browser)
    log_in(bob, console.url, console.tokens["bob"], "bob", "approver")
    sync_api.expect(bob.locator(f"{card} .voters")).to_contain_text("alice")
    approve_in_console(bob, console.approval)
    bob.locator(card).wait_for(state="detached")

    row = history_row(console.server, console.bootstrap, console.approval)
    assert (row["status"], row["votes"]) == ("approve", ["alice", "bob"])
    for page in (bob, alice):  # alice's console hears of it over its change stream
        audit = page.locator("#audit tbody tr", has_text="Deploy web")
        sync_api.expect(audit).to_contain_text("alice")
        sync_api.expect(audit).to_contain_text("bob")
        sync_api.expect(audit).to_contain_text("approve")
    output = console.server.output()
    assert console.tokens["alice"] not in output
    assert console.tokens["bob"] not in output
