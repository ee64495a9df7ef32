"""Who approved what, at a glance: the console over the demo's own log, in Chromium.

The database is what `flightlog demo --auto` leaves (the deployer, the reviewer, the controller
run and its two-person approval, alice's and bob's votes); a `flightlog serve` over it answers
the pages. The README's screenshots (docs/console/*.png) are taken here, from the demo.
A second, in-process server takes a permission request while the page is open, to show the
run's approvals live and decide one on its own page.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.operators import BOOTSTRAP
from eventlog import from_micros, open_log
from projections import Views

from .test_browser import CHROMIUM, CHROMIUM_ARGS, ROOT, log_in, sync_api

DOCS = ROOT / "docs" / "console"
TOKEN = "demo-console-8c41f0a7d29e5b36"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("demo")
    proc = subprocess.run(
        [sys.executable, "-m", "tools.cli", "demo", "--auto", "--port", "0", "--db", "demo.db"],
        cwd=folder, capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder / "demo.db"


@pytest.fixture(scope="module")
def server(db):
    env = {**os.environ, "FLIGHTLOG_OPERATOR_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", "serve", "--db", str(db), "--port", "0"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = ""
        for line in proc.stdout:  # the server prints its address once it accepts connections
            found = re.search(r"listening on (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url, "flightlog serve did not start"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", *CHROMIUM_ARGS])
        try:
            yield b
        finally:
            b.close()


def open_page(browser: Any, url: str, token: str, name: str) -> Any:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, timezone_id="UTC")
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.set_default_timeout(20_000)
    log_in(page, url, token, name)
    return page


@pytest.fixture
def page(browser, server):
    page = open_page(browser, server, TOKEN, BOOTSTRAP)
    page.locator("#runs tbody tr").first.wait_for()
    yield page
    page.context.close()


def views_of(db: Path) -> Views:
    return Views(open_log(db, readonly=True), snapshots=None)


def shot(page: Any, name: str) -> None:
    DOCS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS / f"{name}.png"))


def controller_run(db: Path) -> str:
    return views_of(db).agent_runs()[0].run_id


# -- 1. a run's page lists its approvals, every voter with time and credential ---------------


def test_the_runs_page_names_every_voter_with_time_and_credential(page, server, db):
    views = views_of(db)
    run_id = controller_run(db)
    (quorum,) = [a for a in views.approval_history() if a.run_id == run_id]
    page.goto(f"{server}/ui/runs/{run_id}")
    row = page.locator(f"#run-approvals tr[data-approval-id='{quorum.id}']")
    row.wait_for()
    votes = [r.data for r in views.log.read(f"approval-{quorum.id}") if r.type == "ApprovalVoted"]
    voters = row.locator(".voters li")
    assert voters.count() == len(votes) == 2
    for li, vote in zip(voters.all(), votes, strict=True):
        text = li.inner_text()
        assert vote["actor"] in text
        assert "approve" in text
        assert f"({vote['identity']})" in text  # the credential that cast it
        assert re.search(r"\d\d:\d\d:\d\d\.\d{3}", text), text  # the time, to the millisecond
    shot(page, "run-approvals")


# -- 4. the event inspector ------------------------------------------------------------------


def test_the_event_inspector_is_wide_pretty_copyable_and_in_view(page, server, db):
    log = open_log(db, readonly=True)
    (asked,) = [r for r in log.read("run-deployer") if r.type == "PermissionRequested"]
    page.goto(f"{server}/ui/events/{asked.seq}")
    page.wait_for_url(re.compile(rf"/ui/runs/deployer\?at={asked.seq}#events$"))
    inspector = page.locator(f"#event-history tr.inspector-row[data-seq='{asked.seq}'] .inspector")
    inspector.wait_for()
    table = page.locator("#event-history").bounding_box()
    box = inspector.bounding_box()
    assert box["width"] >= 0.9 * table["width"]  # the whole table's width, not one narrow column
    viewport = page.viewport_size
    assert 0 <= box["y"] < viewport["height"]  # scrolled into view
    pre = inspector.locator("pre.payload")
    text = pre.inner_text()
    assert '\n  "data": {\n    ' in text  # pretty-printed
    assert '"input_preview": "kubectl rollout restart deploy/web"' in text
    assert min(len(line) for line in text.splitlines() if line.strip()) >= 1
    assert pre.bounding_box()["width"] > 600  # lines read whole, not a character or two each
    inspector.locator("button.copy-json").click()
    sync_api.expect(inspector.locator("button.copy-json")).to_have_text("copied")
    assert page.evaluate("navigator.clipboard.readText()") == text
    shot(page, "event-history")


# -- 6. time that reads like time ------------------------------------------------------------


def test_as_of_to_the_millisecond(page, server, db):
    log = open_log(db, readonly=True)
    views = views_of(db)
    run_id = controller_run(db)
    seqs = [m.seq for m in views.timeline_at_each_event(run_id)]
    # A moment (the millisecond after one of the run's events) whose second holds other events
    # after it: only the milliseconds tell where it is.
    target = None
    for seq in seqs[1:-1]:
        (r,) = log.read_all(after_seq=seq - 1, to_seq=seq)
        at = from_micros(r.recorded_us)
        ms = at.replace(microsecond=at.microsecond // 1000 * 1000) + timedelta(milliseconds=1)
        if log.seq_at(ms) != log.seq_at(ms.replace(microsecond=0) + timedelta(seconds=1)):
            target = ms
            break
    assert target is not None, "every demo event in its own second: pick another run"
    typed = target.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:23]
    expected = log.seq_at(datetime.fromisoformat(typed + "+00:00"))
    page.goto(f"{server}/ui/runs/{run_id}")
    as_of = page.locator("#as-of")
    as_of.wait_for()
    assert as_of.get_attribute("step") == "any"  # not whole seconds
    as_of.fill(typed)  # fires change, as a person's edit does
    page.wait_for_url(re.compile(r"\?at=\d{4}-"))
    assert typed in page.url.replace("%3A", ":")
    sync_api.expect(page.locator("#travel-where")).to_contain_text(f"seq {expected} ")


def test_before_the_run_started_and_a_bad_moment(page, server, db):
    run_id = controller_run(db)
    page.goto(f"{server}/ui/runs/{run_id}?at=1")
    banner = page.locator("#not-live[data-state='before']")
    banner.wait_for()
    assert "Before this run started" in banner.inner_text()
    assert "live" not in page.locator("#travel-where").inner_text()
    page.goto(f"{server}/ui/runs/{run_id}?at=abc")
    page.locator("#bad-address").wait_for()
    assert "neither a seq nor an ISO time" in page.locator("#page-panel").inner_text()
    assert not page.locator("#travel-where").count()  # not drawn as "live"


def test_a_travelled_header_is_computed_at_that_moment(page, server, db):
    log = open_log(db, readonly=True)
    run_id = controller_run(db)
    records = [r for r in log.read("controller-demo") if r.data.get("run_id", run_id) == run_id]
    middle = records[len(records) // 2]
    page.goto(f"{server}/ui/runs/{run_id}?at={middle.seq}")
    page.locator("#not-live").wait_for()
    last = page.locator("#run-header dt:has-text('last activity') + dd time")
    assert datetime.fromisoformat(last.get_attribute("datetime")) == from_micros(middle.recorded_us)
    shot(page, "run-travelled")


def test_times_have_a_date_when_not_today_and_durations_read_in_s_and_min(page, server, db):
    run_id = controller_run(db)
    page.clock.set_fixed_time(datetime.now(UTC) + timedelta(days=3))
    page.goto(f"{server}/ui/runs/{run_id}")
    started = page.locator("#run-header dt:has-text('started') + dd time")
    started.wait_for()
    assert re.search(r"\d{4} \d\d:\d\d:\d\d\.\d{3}$", started.inner_text()), started.inner_text()
    durations = page.evaluate(
        "async () => { const u = await import('/ui/util.js');"
        " return [u.duration(850), u.duration(12300), u.duration(212080), u.duration(7500000)]; }"
    )
    assert durations == ["850 ms", "12.3 s", "3 min 32 s", "2 h 5 min"]


# -- 7. search over payloads, filters in the URL, a 404 page and an icon ---------------------


def test_search_finds_payload_text_and_the_filters_live_in_the_url(page, server):
    page.fill("#runs-q", "kubectl")
    page.wait_for_url(re.compile(r"[?&]q=kubectl"))
    # The URL changes before the filtered list arrives (and the deployer is in the unfiltered
    # one too): wait for the list to be the filtered one.
    sync_api.expect(page.locator("#runs tbody tr")).to_have_count(1)
    ids = set(page.locator("#runs tbody tr").evaluate_all("ns => ns.map(n => n.dataset.runId)"))
    assert ids == {"deployer"}  # only the deployer asked to run kubectl
    page.select_option("#runs-kind", "broker")
    page.wait_for_url(re.compile(r"kind=broker"))
    shot(page, "runs-search")
    page.reload()
    page.locator("#runs tbody tr[data-run-id='deployer']").wait_for()
    assert page.locator("#runs-q").input_value() == "kubectl"
    assert page.locator("#runs-kind").input_value() == "broker"
    # Opening a run keeps the list as it was filtered.
    page.locator("#runs tbody tr[data-run-id='deployer']").click()
    page.wait_for_url(re.compile(r"/ui/runs/deployer\?.*q=kubectl"))


def test_a_page_the_console_does_not_have_is_its_404_with_an_icon(page, server):
    response = page.goto(f"{server}/ui/nosuchpage")
    assert response is not None
    assert response.status == 404
    page.locator("#not-found").wait_for()
    assert "/ui/nosuchpage" in page.locator("#page-panel").inner_text()
    page.goto(f"{server}/ui/runs/no-such-run")
    page.locator("#not-found").wait_for()
    icon = page.locator("link[rel=icon]").get_attribute("href")
    got = httpx.get(server + icon)
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("image/svg+xml")


# -- 1 and 3, live: a request arrives while the run's page is open; deciding on its page -------


@pytest.fixture
def live(tmp_path):
    from actors import System
    from actors.operators import APPROVER
    from tools.demo.background import BackgroundServer
    from tools.http.app import create_app

    with System.open(str(tmp_path / "live.db"), approval_timeout=600.0) as system:
        _, alice = system.operators.enrol("alice", APPROVER, by="tests")
        run_token = system.broker.create_run("deployer", by="tests")
        app = create_app(system, operator_token_sha256="")
        with BackgroundServer(app) as server:
            yield server.url, system, alice, run_token


def test_a_request_shows_on_its_runs_page_live_and_is_rejected_with_a_reason_on_its_own(browser, live):
    url, system, alice, run_token = live
    agent = httpx.Client(base_url=url, timeout=30)
    report = {"run_id": "deployer", "token": run_token, "state": "working", "note": "preparing the rollout"}
    assert agent.post("/report", json=report).status_code == 200
    page = open_page(browser, url, alice, "alice")
    try:
        page.goto(f"{url}/ui/runs/deployer")
        page.locator("#run-approvals-none").wait_for()
        ask = {
            "run_id": "deployer", "token": run_token, "request_id": "rollout-1", "tool_name": "bash",
            "description": "Run: kubectl rollout restart deploy/web",
            "input_preview": "kubectl rollout restart deploy/web",
        }  # fmt: skip
        assert agent.post("/permission_request", json=ask).status_code == 200
        # Live: the request (recorded after the run's last event) appears on the open page.
        row = page.locator("#run-approvals tr[data-status='pending']")
        row.wait_for()
        approval_id = row.get_attribute("data-approval-id")
        row.locator("a").first.click()
        page.wait_for_url(f"**/ui/approvals/{approval_id}")
        decide = page.locator("#approval-decide")
        decide.wait_for()
        decide.locator("button.reject").click()
        dialog = page.locator("dialog#confirm")
        dialog.wait_for()
        assert page.locator("#confirm-ok").inner_text() == "Reject"
        style = dialog.evaluate(
            "d => { const s = getComputedStyle(d); return [s.borderRadius, s.boxShadow]; }"
        )
        assert style[0] != "0px"  # the styled dialog, not the browser's bare one
        assert style[1] != "none"
        page.fill("#decision-reason", "not during the freeze")
        page.locator("#confirm-ok").click()
        voters = page.locator("#approval-voters li[data-decision='reject']")
        voters.wait_for()
        assert "alice" in voters.inner_text()
        assert "not during the freeze" in voters.inner_text()
        # The address and the pane agree: still the approval, after the live refresh too.
        assert page.url.endswith(f"/ui/approvals/{approval_id}")
        page.locator("#approvals li").first.wait_for(state="detached")
        assert page.locator("#approval-title").is_visible()
        assert not page.locator("#run-title").count()
        decided = [r for r in system.log.read(f"approval-{approval_id}") if r.type == "ApprovalDecided"]
        assert decided[0].meta["reason"] == "not during the freeze"
        page.goto(f"{url}/ui/runs/deployer")
        row = page.locator(f"#run-approvals tr[data-approval-id='{approval_id}']")
        sync_api.expect(row).to_contain_text("not during the freeze")
        sync_api.expect(row).to_contain_text("alice")
    finally:
        page.context.close()
        agent.close()
