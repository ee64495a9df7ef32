"""A controller run's console page comes a page at a time too: its timeline from per-run
checkpoints, its steps and event history by its stream's versions, its approvals from the
log's approval index over its own span. In process, with the records each page folds counted;
then once through a real `flightlog serve`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from actors import System, make_token, token_digest
from eventlog import ANY, ManualClock, open_log
from eventlog.events import (
    AgentRunStarted,
    AgentRunStatusChanged,
    ApprovalPublished,
    ApprovalRequested,
    HarnessEventRecorded,
)
from projections import Views
from tools.http import create_app

from .conftest import BASE, OPERATOR_TOKEN, PortalTransport
from .server import ServerProcess

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STREAM = "controller-c1"
CALLS = 600  # tool calls of the long run: 1,200 records, 600 entries


def _fill(path: str) -> None:
    """A short first run, then a long run of tool calls with an approval, then a third run."""
    clock = ManualClock(T0)
    log = open_log(path, clock=clock)

    def at(n: int) -> datetime:
        return T0 + timedelta(seconds=n)

    def harness(run: str, n: int, type_: str, data: dict) -> HarnessEventRecorded:
        return HarnessEventRecorded(run, type_, f"e-{run}-{n}", data, at(n))

    log.append(STREAM, [AgentRunStarted("first", "c1", "s1", "First", "hi", at(0)),
                        harness("first", 1, "user.message", {"content": "hi"}),
                        AgentRunStatusChanged("first", "succeeded", "", at(2))], expect=ANY)  # fmt: skip
    log.append(STREAM, [AgentRunStarted("long", "c1", "s1", "Long", "go", at(3))], expect=ANY)
    events = []
    for n in range(CALLS):
        call = {"tool_call_id": f"t{n}", "tool_name": "bash", "arguments": {"n": n}}
        done = {"tool_call_id": f"t{n}", "ok": n}
        events += [harness("long", 10 + 2 * n, "tool.start", call)]
        events += [harness("long", 11 + 2 * n, "tool.complete", done)]
        if n == 300:
            until = at(700) + timedelta(days=1)
            request = ApprovalRequested("ap-long", "long", "t300", "tool", "bash 300", "n=300", "high",
                                        "0" * 64, False, 1, at(700), until, "c1")  # fmt: skip
            log.append(STREAM, events, expect=ANY)
            log.append("approval-ap-long", [request, ApprovalPublished("ap-long", at(700))], expect=ANY)
            events = []
    log.append(STREAM, [*events, AgentRunStatusChanged("long", "succeeded", "", at(5000))], expect=ANY)
    third = AgentRunStarted("third", "c1", "s1", "Third", "again", at(5001))
    log.append(STREAM, [third, harness("third", 5002, "user.message", {"content": "again"})], expect=ANY)
    log.close()


@pytest.fixture
def served(tmp_path, portal):
    path = str(tmp_path / "agent-pages.db")
    _fill(path)
    token = make_token()
    with System.open(path, clock=ManualClock(T0), scheduler=False) as system:
        app = create_app(system, operator_token_sha256=token_digest(token))
        with httpx.Client(transport=PortalTransport(app, portal), base_url=BASE,
                          headers={"Authorization": f"Bearer {token}"}) as client:  # fmt: skip
            yield system, client, path


def _travel(client, run: str, query: str = "") -> dict:
    response = client.get(f"/api/v1/console/runs/{run}/travel{query}")
    assert response.status_code == 200, response.text
    return response.json()


def _plain(path: str, run: str, at: int) -> list[dict]:
    log = open_log(path, readonly=True)
    try:
        return [e.to_dict() for e in Views(log, snapshots=None).timeline(run, at=at)]
    finally:
        log.close()


def test_a_controller_runs_page_is_its_timeline_cut_to_the_page(served):
    system, client, path = served
    live = _travel(client, "long", "?limit=50")
    assert (live["kind"], live["live"], live["status"]) == ("agent", True, "succeeded")
    # Its steps are its own records, not the third run's after it; its timeline holds the
    # first run's entry before its own 600 tool calls.
    assert live["steps"] == 2 * CALLS + 2
    assert live["total"] == CALLS + 1
    head = system.log.head().seq
    plain = _plain(path, "long", head)
    assert [(e["seq"], e["id"], e["status"]) for e in live["entries"]] == [
        (e["seq"], e["id"], e["status"]) for e in plain[-50:]
    ]
    # As of a step in the middle: the page then, its status then, and what changed since.
    step = _travel(client, "long", "?step=400&limit=50")
    assert step["step"] == 400
    assert step["live"] is False
    assert step["status"] == ""
    then = _plain(path, "long", step["at"])
    assert [e["seq"] for e in step["entries"]] == [e["seq"] for e in then[-50:]]
    assert step["since"]["added_total"] == len(plain) - len(then)
    # The approval asked for during the run is on its page; the first run's page has none.
    assert [a["id"] for a in live["approvals"]] == ["ap-long"]
    assert _travel(client, "first")["approvals"] == []
    assert _travel(client, "first")["steps"] == 3


def test_a_controller_runs_pages_cost_the_page_not_the_stream(served):
    system, client, _ = served
    _travel(client, "long")  # the first read of the run makes its checkpoints
    pages = system.views.agent_pages
    pages.reads = 0
    live = _travel(client, "long", "?limit=50")
    # Live: the newest page, folded from the checkpoints below it (64 versions apart).
    assert pages.reads <= 2 * (60 + 64), pages.reads
    for query in ("?step=700&limit=50", "?step=1100&limit=50"):
        pages.reads = 0
        page = _travel(client, "long", query)
        assert len(page["entries"]) == 50, query
        # The page then and now (each from its checkpoint), and what changed since: the page's
        # window now is folded on from the page to the run's end, where its session's next run
        # started (a later record of the run may still complete a tool call shown there). Never
        # the run from its start, nor the runs after it.
        assert pages.reads <= 4 * (2 * 50 + 64) + (live["steps"] - page["step"]), (query, pages.reads)
    # An earlier page as of a moment: folded from the checkpoint below it on to that moment.
    pages.reads = 0
    page = _travel(client, "long", "?limit=50&before=200&at=900")
    assert len(page["entries"]) == 50
    assert page["since"]["added"] == []  # what changed came with the page before it
    assert pages.reads <= 3 * (2 * 50 + 64) + (900 - page["entries"][0]["seq"]), pages.reads


def test_a_controller_runs_event_history_is_its_steps_a_page_at_a_time(served):
    _, client, _ = served
    body = client.get("/api/v1/console/runs/long/events?offset=1100&limit=200").json()
    assert body["total"] == 2 * CALLS + 2
    assert len(body["events"]) == 102
    assert body["events"][-1]["type"] == "AgentRunStatusChanged"
    assert {e["data"]["run_id"] for e in body["events"]} == {"long"}


@pytest.mark.slow
def test_through_a_real_server(tmp_path):
    path = tmp_path / "served.db"
    _fill(str(path))
    server = ServerProcess(path, OPERATOR_TOKEN)
    try:
        headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        answer = server.client.get("/api/v1/console/runs/long/travel?step=10&limit=5", headers=headers)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["kind"], body["step"], body["steps"]) == ("agent", 10, 2 * CALLS + 2)
        # Step 10 is the start of its fifth tool call: the five calls so far (the first run's
        # prompt is the page before).
        assert [e["id"] for e in body["entries"]] == ["t0", "t1", "t2", "t3", "t4"]
        assert body["before"] == 1
        bad = server.client.get("/api/v1/console/runs/long/travel?step=5000", headers=headers)
        assert bad.status_code == 400
    finally:
        server.close()
