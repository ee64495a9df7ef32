"""The console's run page, event history and overview come a page at a time, with cursors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from actors import System, make_token, token_digest
from eventlog import ANY, ManualClock, open_log
from eventlog.events import ApprovalPublished, ApprovalRequested, RunRegistered, RunReported
from tools.http import create_app

from .conftest import BASE, PortalTransport

T0 = datetime(2026, 1, 1, tzinfo=UTC)
REPORTS = 1_000


def _report(n: int) -> RunReported:
    return RunReported("long", "working", f'{{"note": "step {n}"}}', T0 + timedelta(seconds=n))


@pytest.fixture
def served(tmp_path, portal):
    path = str(tmp_path / "pages.db")
    clock = ManualClock(T0)
    log = open_log(path, clock=clock)
    log.append("run-long", [RunRegistered("long", "0" * 64, T0, T0)], expect=ANY)
    log.append("run-long", [_report(n) for n in range(REPORTS)], expect=ANY)
    for n in range(30):
        request = ApprovalRequested(
            f"ap-{n:02d}", "long", "", "shell", f"Run step {n}", "make", "low", "0" * 64, False, 1,
            T0, T0 + timedelta(days=1), "op",
        )  # fmt: skip
        log.append(f"approval-ap-{n:02d}", [request, ApprovalPublished(f"ap-{n:02d}", T0)], expect=ANY)
    log.close()
    token = make_token()
    with System.open(path, clock=clock, scheduler=False) as system:
        app = create_app(system, operator_token_sha256=token_digest(token))
        transport = PortalTransport(app, portal)
        with httpx.Client(
            transport=transport, base_url=BASE, headers={"Authorization": f"Bearer {token}"}
        ) as client:
            yield system, client


def _travel(client, query: str = "") -> dict:
    response = client.get(f"/api/v1/console/runs/long/travel{query}")
    assert response.status_code == 200, response.text
    return response.json()


def test_a_long_runs_page_is_the_newest_entries_and_its_cursor_pages_back_to_the_first(served):
    _, client = served
    first = _travel(client, "?limit=300")
    assert first["total"] == REPORTS + 1
    assert len(first["entries"]) == 300
    assert first["entries"][-1]["text"] == f"step {REPORTS - 1}"
    seen = [e["seq"] for e in first["entries"]]
    cursor = first["before"]
    while cursor is not None:
        page = _travel(client, f"?limit=300&before={cursor}")
        seen = [e["seq"] for e in page["entries"]] + seen
        cursor = page["before"]
    assert page["start"] == 0  # the last page is the timeline's start
    assert page["entries"][0]["status"] == "registered"
    assert seen == sorted(seen)
    assert len(seen) == REPORTS + 1


def test_a_cursor_names_the_same_entries_after_the_run_goes_on(served):
    system, client = served
    page = _travel(client, "?limit=50&before=500")
    system.log.append("run-long", [_report(REPORTS + n) for n in range(200)], expect=ANY)
    again = _travel(client, "?limit=50&before=500")
    assert again["entries"] == page["entries"]
    assert again["total"] == page["total"] + 200


@pytest.mark.parametrize("query", ["?before=x", "?before=99999", "?limit=-1", "?step=0", "?step=abc"])
def test_a_bad_cursor_is_refused(served, query):
    _, client = served
    response = client.get(f"/api/v1/console/runs/long/travel{query}")
    assert response.status_code == 400, response.text


def test_a_travelled_page_costs_the_page_not_the_run(served):
    system, client = served
    _travel(client)  # the first read of the run makes its checkpoints
    pages = system.views.pages
    for query in ("?at=500&limit=100", "?limit=100&before=300", "?step=700&limit=100"):
        pages.reads = 0
        page = _travel(client, query)
        assert len(page["entries"]) == 100
        # every page folds at most its own records, twice (the page and what changed since), plus
        # the distance from two checkpoints (64 versions each): never the run's 1,001 records
        assert pages.reads <= 4 * (100 + 2 * 64), (query, pages.reads)


def test_the_event_history_is_read_a_page_of_versions_at_a_time(served):
    _, client = served
    response = client.get("/api/v1/console/runs/long/events?offset=990&limit=100")
    assert response.status_code == 200
    body = response.json()
    assert body["total"] == REPORTS + 1
    assert [e["version"] for e in body["events"]] == list(range(991, REPORTS + 2))


def test_the_overview_pages_pending_approvals_and_says_when_nothing_changed(served):
    _, client = served
    first = client.get("/api/v1/console/overview?limit=20").json()
    assert first["total"] == 30
    assert [a["id"] for a in first["approvals"]] == [f"ap-{n:02d}" for n in range(20)]
    rest = client.get(f"/api/v1/console/overview?limit=20&after={first['next']}").json()
    assert [a["id"] for a in rest["approvals"]] == [f"ap-{n:02d}" for n in range(20, 30)]
    assert rest["next"] is None
    same = client.get(f"/api/v1/console/overview?since={first['head']}").json()
    assert same["unchanged"] is True
    assert client.get("/api/v1/console/overview?after=x").status_code == 400


def test_a_run_travelled_to_before_its_start_names_its_first_seq(served):
    system, client = served
    first = next(iter(system.log.read("run-long", 1, 1))).seq
    page = _travel(client, f"?at={first - 1}") if first > 1 else _travel(client, "?at=0")
    assert page["before_start"] is True
    assert page["first_seq"] == first
    assert page["entries"] == []


def test_a_page_travelled_to_the_head_is_the_live_page(served):
    # Travelled, the run now is read for its head alone: at the head itself the answer is the
    # live page's, and before it the run's steps are still the live page's.
    _, client = served
    live = _travel(client, "?limit=50")
    assert live["live"] is True
    assert _travel(client, f"?limit=50&at={live['at']}") == live
    then = _travel(client, "?limit=50&at=500")
    assert (then["live"], then["steps"], then["at"]) == (False, live["steps"], 500)
    assert then["since"]["added_total"] == live["total"] - then["total"]
