"""The web console in a real headless Chromium: log in, approve, watch, travel back.

Skips with a reason when Playwright or Debian's Chromium is missing (.ci/run installs both).
Screenshots of each step land in artifacts/console/ for a person to look at.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
from typing import NamedTuple
from urllib.parse import urlsplit

import pytest

from actors import System, make_token, token_digest
from actors.operators import APPROVER, BOOTSTRAP

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("FLIGHTLOG_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "artifacts" / "console"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

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


class Served(NamedTuple):
    """A console over a System: its URL, the System, and the token of each enrolled operator."""

    url: str
    system: System
    tokens: dict[str, str]


@pytest.fixture
def served(tmp_path):
    from tools.demo.background import BackgroundServer
    from tools.http.app import create_app

    bootstrap = make_token()
    with System.open(str(tmp_path / "console.db"), approval_timeout=600.0) as system:
        # Alice logs in with her own token: the console knows her by the name she was enrolled with.
        _, alice = system.operators.enrol("alice", APPROVER, by="tests")
        app = create_app(system, operator_token_sha256=token_digest(bootstrap))
        with BackgroundServer(app) as server:
            yield Served(server.url, system, {"alice": alice, BOOTSTRAP: bootstrap})


def log_in(page, url: str, token: str, name: str) -> None:
    """Log in with `token` alone; the page then names the operator the server says it is."""
    page.goto(f"{url}/ui/")
    page.fill("#login-token", token)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector(f"#who:has-text('signed in as {name} (')")


@pytest.fixture
def page():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(20_000)
            yield page
        finally:
            browser.close()


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_approve_in_the_console_then_travel_back_to_pending(served, page, tmp_path):
    url, system, tokens = served
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tools.demo.agent",
            "--url",
            url,
            "--run-id",
            "deployer",
            "--role",
            "deployer",
        ],
        cwd=ROOT,
        # The server takes enrolled runs: the run is created first, and its agent given its token.
        env={**os.environ, "FLIGHTLOG_RUN_TOKEN": system.broker.create_run("deployer", by="tests")},
        stdout=subprocess.DEVNULL,
    )
    try:
        # 1. Log in with alice's own operator token (no name: the token says who she is).
        page.goto(f"{url}/ui/")
        page.fill("#login-token", tokens["alice"])
        shot(page, "1-login")
        page.click("#login-form button[type=submit]")
        page.wait_for_selector("#who:has-text('signed in as alice (approver)')")

        # 2. The approval the agent asked for shows up, with its digest and countdown.
        card = page.locator("#approvals li", has_text="kubectl rollout restart")
        card.wait_for()
        assert "digest" in card.inner_text()
        assert "deadline in" in card.inner_text()
        shot(page, "2-pending")

        # 3. Approve it (with confirmation); it leaves the pending list.
        card.locator("button.approve").click()
        page.locator("#confirm-ok").click()
        page.locator("#approvals li", has_text="kubectl rollout restart").wait_for(state="detached")
        shot(page, "3-approved")

        # 4. Watch the run finish in its timeline (updated live over server-sent events).
        page.locator("#runs tbody tr[data-run-id='deployer']").click()
        page.wait_for_url("**/ui/runs/deployer")
        page.locator("#timeline li[data-kind='finish'][data-status='done']").wait_for()
        assert page.locator("#timeline li[data-kind='permission'][data-status='allow']").count() == 1
        shot(page, "4-finished")
        assert agent.wait(timeout=30) == 0

        # 5. Move the slider back to the moment of the request: the approval is pending again.
        seqs = [r.seq for r in system.log.read("run-deployer")]
        requested = next(r.seq for r in system.log.read("run-deployer") if r.type == "PermissionRequested")
        page.evaluate(
            "i => { const s = document.getElementById('slider'); s.value = String(i);"
            " s.dispatchEvent(new Event('change')); }",
            seqs.index(requested),
        )
        page.locator("#timeline li[data-kind='permission'][data-status='pending']").wait_for()
        page.locator("#run-approvals tbody tr[data-status='pending']").wait_for()
        assert page.locator("#timeline li[data-kind='finish']").count() == 0
        assert page.locator("#since").is_visible()
        shot(page, "5-travelled-back")

        # The audit trail names the operator and her credential, and the chain verifies.
        assert "chain verified" in page.locator("#badge").inner_text()
        row = system.views.approval_history()[0]
        alice = system.operators.get("alice")
        assert alice is not None
        assert (row.decision, row.actor, row.identity) == ("approve", "alice", alice.credential_id)
    finally:
        if agent.poll() is None:
            agent.kill()
        agent.wait(timeout=10)


def test_a_live_refresh_that_answers_after_a_travel_does_not_overwrite_it(served, page):
    url, system, tokens = served
    system.broker.register("slow")
    for _ in range(3):
        system.broker.heartbeat("slow")
    log_in(page, url, tokens["alice"], "alice")
    page.goto(f"{url}/ui/runs/slow")
    page.locator("#timeline li").first.wait_for()
    page.locator("body[data-stream='open']").wait_for(state="attached")  # it hears the log grow
    assert page.locator("#not-live").is_hidden()

    held: dict[str, sync_api.Route] = {}  # the travel answers, released in the order the test picks

    def travelled(url: str) -> bool:
        return "at=" in url

    def hold(route: sync_api.Route) -> None:
        if "step=" in route.request.url:  # a broker run's slider first asks which seq a step is
            route.continue_()
        else:
            held.setdefault("then" if travelled(route.request.url) else "live", route)

    page.route("**/api/v1/console/runs/slow/travel*", hold)

    def is_travel(live: bool):
        return lambda r: "/travel" in r.url and "step=" not in r.url and (not travelled(r.url)) == live

    # The operator travels back; while that answer is on its way, the log grows, and the
    # console asks for the live run again (it is still showing the live run).
    with page.expect_request(is_travel(live=False)):
        page.evaluate("() => { const s = document.getElementById('slider'); s.value = '0';"
                      " s.dispatchEvent(new Event('change')); }")  # fmt: skip
    with page.expect_request(is_travel(live=True)):
        system.broker.heartbeat("slow")
    held.pop("then").continue_()
    page.locator("#not-live").wait_for()
    settled = page.evaluate("() => Number(document.body.dataset.runLoads)")
    with page.expect_response(is_travel(live=True)):
        held.pop("live").continue_()
    page.wait_for_function("n => Number(document.body.dataset.runLoads) > n", arg=settled)
    assert page.locator("#not-live").is_visible(), "the late live answer replaced the travel"
    assert travelled(page.url)


def test_the_console_refuses_a_wrong_token_and_requests_without_the_csrf_secret(served, page):
    url, _, tokens = served
    page.goto(f"{url}/ui/")
    page.fill("#login-token", "not-the-token")
    page.click("#login-form button[type=submit]")
    page.locator("#login-error", has_text="not an operator's token").wait_for()
    page.fill("#login-token", tokens["alice"])
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#who:has-text('signed in as alice (approver)')")
    # A logged-in browser's cookie alone can neither decide nor read: every API request needs
    # the session's CSRF secret, which only this page was given (at login).
    status = page.evaluate(
        "async () => (await fetch('/api/v1/approvals/x/approve', {method: 'POST', body: '{}'})).status"
    )
    assert status == 401
    status = page.evaluate("async () => (await fetch('/api/v1/console/me')).status")
    assert status == 401
    me = page.evaluate(
        "async () => (await fetch('/api/v1/console/me',"
        " {headers: {'X-Flightlog-CSRF': localStorage.getItem('flightlog-csrf')}})).json()"
    )
    assert (me["name"], me["role"]) == ("alice", "approver")
    port = urlsplit(url).port
    cookie = next(c for c in page.context.cookies() if c["name"] == f"flightlog_session_{port}")
    assert cookie["httpOnly"]
    assert cookie["sameSite"] == "Strict"


def test_the_console_takes_no_name_from_the_page_or_the_url(served, page):
    url, _, tokens = served
    # `?as=` once pre-filled the name a decision was recorded under; now it fills nothing.
    page.goto(f"{url}/ui/?as=bob")
    page.locator("#login-token").wait_for()
    assert page.locator("#login-name").count() == 0
    assert "bob" not in page.locator("#login").inner_text()
    page.fill("#login-token", tokens["alice"])
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#who:has-text('signed in as alice (approver)')")
    assert "bob" not in page.locator("#who").inner_text()
    # A name sent with the token is ignored: the session is the token's operator's.
    answer = page.evaluate(
        "async token => (await fetch('/ui/login', {method: 'POST',"
        " headers: {'Content-Type': 'application/json'},"
        " body: JSON.stringify({name: 'bob', token})})).json()",
        tokens["alice"],
    )
    assert (answer["name"], answer["role"]) == ("alice", "approver")


def test_the_console_shows_a_forged_snapshot_as_tampering(tmp_path, page):
    from eventlog import open_log
    from tools._integrity import check_log, drop_untrusted
    from tools.demo.background import BackgroundServer
    from tools.http.app import create_app

    from ..travel.forgery import FORGER, forge_approval_history, record_rejection, store_snapshots

    db = str(tmp_path / "forged.db")
    with open_log(db) as log:
        record_rejection(log)
        store_snapshots(log)
        forge_approval_history(log)
    token = make_token()
    with open_log(db) as log:  # as `flightlog serve` opens it: verified first
        integrity = check_log(log)
        drop_untrusted(log, integrity.snapshots)
        with (
            System.open(log) as system,
            BackgroundServer(
                create_app(system, operator_token_sha256=token_digest(token), integrity=integrity)
            ) as server,
        ):
            log_in(page, server.url, token, BOOTSTRAP)
            banner = page.locator("#tamper")
            banner.wait_for()
            assert "approval_history" in banner.inner_text()
            page.locator("#badge.bad").wait_for()
            assert "FORGED" in page.locator("#badge").inner_text()
            page.locator("#audit td", has_text="alice").first.wait_for()
            assert FORGER not in page.locator("#audit").inner_text()
            shot(page, "5-tampered")
