"""The console's fork dialog at an approval, in Chromium against a real `flightlog serve`: pick one
of the run's decided approvals, the other decision is offered, and the fork names it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from actors import System
from actors.operators import BOOTSTRAP
from eventlog import open_log
from tests.controller.forks import approval_in_file as approval_of
from tests.controller.forks import broker_origin, record_origin

from .served import serving
from .test_browser import CHROMIUM, CHROMIUM_ARGS, log_in, sync_api

TOKEN = "fork-dialog-8c1e4d7b2a9f3605e1d8c4b7"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    """An agent run whose request alice approved, and a broker run (lg-1) whose request bob refused."""
    path = tmp_path_factory.mktemp("fork-dialog") / "forks.db"
    with System.open(path, scheduler=False) as system:
        record_origin(system)
        broker_origin(system)
    return path


@pytest.fixture(scope="module")
def server(db):
    with serving(db, TOKEN) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", *CHROMIUM_ARGS])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    log_in(page, server, TOKEN, BOOTSTRAP)
    page.locator("#runs tbody tr").first.wait_for()
    yield page
    context.close()


def test_a_broker_run_is_forked_at_its_refused_approval_and_the_token_shown_once(page, server, db):
    approval = approval_of(db, "lg-1")
    page.goto(f"{server}/ui/runs/lg-1")
    page.locator("#fork").click()
    assert page.locator("#fork-at").input_value() == approval  # its only choice: no seq for a broker run
    assert page.locator("#fork-decision").input_value() == "approve"  # the other one than recorded
    assert not page.locator("#fork-redrive").count()  # a broker run's fork goes on in its own agent
    page.fill("#fork-reason", "ship it")
    page.locator("#confirm-ok").click()
    token = page.locator("#fork-token")
    token.wait_for()
    shown = token.input_value()
    assert re.fullmatch(r"[0-9a-f]{32}", shown)
    page.locator("#confirm-ok").click()
    page.wait_for_url(lambda u: "/ui/runs/" in u and "lg-1" not in u)
    fork_id = page.url.rsplit("/", 1)[1]
    changed = page.locator("#forked-decision")
    changed.wait_for()
    assert "approve by bootstrap here (reject there)" in changed.inner_text()
    log = open_log(db, readonly=True)
    try:
        with System.open(log, scheduler=False) as system:
            assert system.broker.authenticate(fork_id, shown)  # the new run's token, for its agent
            [row] = [r for r in system.views.approval_history() if r.run_id == fork_id]
            assert (row.status, row.actor) == ("approve", "bootstrap")
    finally:
        log.close()


def test_an_agent_run_offers_its_moment_or_an_approval_with_the_other_decision(page, server, db):
    log = open_log(db, readonly=True)
    try:
        with System.open(log, scheduler=False) as system:
            origin = next(r for r in system.views.agent_runs() if not r.forked_from)
    finally:
        log.close()
    approval = approval_of(db, origin.run_id)
    page.goto(f"{server}/ui/runs/{origin.run_id}")
    page.locator("#fork").click()
    assert page.locator("#fork-at").input_value() == ""  # this moment first
    assert page.locator("#fork-decision").is_hidden()
    page.select_option("#fork-at", approval)
    assert page.locator("#fork-decision").input_value() == "reject"
    page.locator("#confirm-ok").click()
    page.wait_for_url(lambda u: "/ui/runs/" in u and origin.run_id not in u)
    changed = page.locator("#forked-decision")
    changed.wait_for()
    assert "reject by bootstrap here (approve there)" in changed.inner_text()
