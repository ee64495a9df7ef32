"""Approval notifications: each approval's requested and decided notices reach a webhook exactly
once across a `flightlog serve` restart in the middle, signed, with idempotency keys; a failed
delivery is retried."""

from __future__ import annotations

import json
import pathlib
import re
from collections import Counter
from datetime import UTC, datetime

import pytest

from eventlog import open_log
from eventlog.events import ApprovalDecided
from tools.feeds import WebhookFeed, sign, verify_signature

from ..http.server import ServerProcess
from ..tools.helpers import seed_approval
from .receivers import Webhook

SECRET = "webhook-test-secret"
pytestmark = pytest.mark.slow


@pytest.fixture
def webhook():
    w = Webhook()
    yield w
    w.close()


def decide(db, approval_id: str, decision: str = "approve") -> None:
    now = datetime.now(UTC)
    with open_log(db) as log:
        log.append(
            f"approval-{approval_id}", [ApprovalDecided(approval_id, decision, "alice", "cred-a", now)]
        )


def seen(webhook: Webhook) -> Counter[tuple[str, str]]:
    """(approval id, notice type) -> how many times, idempotency keys de-duplicated."""
    unique = {h["idempotency-key"]: json.loads(body) for h, body in webhook.deliveries}
    return Counter((d["approval"]["id"], d["type"]) for d in unique.values())


def test_each_notice_arrives_once_across_a_restart(tmp_path, webhook, monkeypatch):
    monkeypatch.setenv("FLIGHTLOG_NOTIFY_SECRET", SECRET)
    db = tmp_path / "served.db"
    args = ("--notify", webhook.url)
    first = ServerProcess(db, "operator-0123456789abcdef-secret", args)
    try:
        a = seed_approval(db, run_id="deployer")  # appended by another process: the feed follows the file
        webhook.wait_for(lambda: seen(webhook)[(a, "approval.requested")] == 1, "a requested")
        decide(db, a)
        webhook.wait_for(lambda: seen(webhook)[(a, "approval.decided")] == 1, "a decided")
        assert first.stop() == 0
    finally:
        first.close()
    b = seed_approval(db, run_id="reviewer")  # while no server runs: told after the restart
    decide(db, b, "reject")
    second = ServerProcess(db, "operator-0123456789abcdef-secret", args)
    try:
        webhook.wait_for(lambda: seen(webhook)[(b, "approval.decided")] == 1, "b decided")
        c = seed_approval(db, run_id="deployer")
        webhook.wait_for(lambda: seen(webhook)[(c, "approval.requested")] == 1, "c requested")
    finally:
        second.close()
    assert seen(webhook) == {
        (a, "approval.requested"): 1, (a, "approval.decided"): 1,
        (b, "approval.requested"): 1, (b, "approval.decided"): 1, (c, "approval.requested"): 1,
    }  # fmt: skip
    for headers, body in webhook.deliveries:
        assert verify_signature(SECRET.encode(), body, headers["flightlog-signature"])
        assert not verify_signature(b"another key", body, headers["flightlog-signature"])
    doc = next(json.loads(body) for _, body in webhook.deliveries if json.loads(body)["approval"]["id"] == b)
    assert doc["url"] == f"{second.url}/ui/approvals/{b}"  # the console's deep link
    assert doc["text"].startswith("Approval needed (high risk) for run reviewer: rm -rf build")


def test_a_failed_delivery_is_retried_and_a_decision_says_who(tmp_path, webhook):
    db = tmp_path / "feed.db"
    with open_log(db) as log:
        feed = WebhookFeed(log, webhook.url, b"key", "http://flightlog.test", backoff=0.01).start()
        try:
            webhook.fail = 2  # two 503s, then it takes it
            a = seed_approval(db, run_id="deployer")
            decide(db, a, "reject")
            webhook.wait_for(lambda: len(webhook.deliveries) == 2, "both notices")
        finally:
            feed.close()
    assert feed.retries == 2
    decided = json.loads(webhook.deliveries[1][1])
    assert decided["type"] == "approval.decided"
    assert decided["decision"]["actor"] == "alice"
    assert decided["decision"]["credential"] == "cred-a"
    assert decided["decision"]["decision"] == "reject"
    assert decided["text"].startswith("Rejected by alice (cred-a): rm -rf build (run deployer)")
    assert webhook.deliveries[1][0]["flightlog-event"] == "approval.decided"


def test_the_receiver_check_in_the_docs_accepts_a_signature_and_refuses_a_forgery():
    doc = pathlib.Path(__file__).resolve().parents[2] / "docs" / "notifications.md"
    (code,) = re.findall(r"```python\n(.*?)```", doc.read_text(), re.DOTALL)
    scope: dict = {}
    exec(code, scope)
    body = b'{"type":"approval.requested"}'
    header = sign(b"key", body, 1_700_000_000)
    assert scope["valid"](b"key", body, header)
    assert not scope["valid"](b"key", body + b" ", header)
    (example,) = re.findall(r"```json\n(.*?)```", doc.read_text(), re.DOTALL)
    assert "approval.requested" in example
