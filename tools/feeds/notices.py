"""Approval notifications: the JSON document a webhook gets, and its signature.

One document per approval requested, decided, expired or withdrawn: structured fields, a
ready-to-post `text` line (Slack-escaped: `&`, `<` and `>` as entities, so a title cannot
mention a channel) and the console's deep link. The body is signed with HMAC-SHA256 in the
`Flightlog-Signature` header (`t=<unix seconds>,v1=<hex of HMAC(key, "<t>." + body)>`); the
`Idempotency-Key` header is the event id of the record the notification tells of.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from datetime import datetime
from typing import Any

import orjson

from eventlog import EventLog, Record

SECRET_ENV = "FLIGHTLOG_NOTIFY_SECRET"
SIGNATURE_HEADER = "Flightlog-Signature"
IDEMPOTENCY_HEADER = "Idempotency-Key"
EVENT_HEADER = "Flightlog-Event"
DETAIL_LIMIT = 500  # characters of an approval's detail a notification carries
OUTCOMES = {"approve": "decided", "reject": "decided", "expired": "expired", "withdrawn": "withdrawn"}


def sign(key: bytes, body: bytes, timestamp: int) -> str:
    """The `Flightlog-Signature` header's value for `body` sent at `timestamp` (unix seconds)."""
    mac = hmac.new(key, str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify_signature(key: bytes, body: bytes, header: str) -> bool:
    """Whether `header` (a `Flightlog-Signature` value) signs `body` under `key`."""
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    if not parts.get("t", "").isdigit() or "v1" not in parts:
        return False
    return hmac.compare_digest(sign(key, body, int(parts["t"])), f"t={parts['t']},v1={parts['v1']}")


def notify_key(db: str, *, announce: Any = None) -> bytes:
    """The signing key: FLIGHTLOG_NOTIFY_SECRET, else a key file beside DB made 0600 on first use.

    `announce(path)` is called with the key file's path when the key comes from one.
    """
    secret = os.environ.get(SECRET_ENV, "")
    if secret:
        return secret.encode()
    local = db.startswith(("postgresql://", "postgres://")) or db == ":memory:"
    path = "flightlog-notify-key" if local else f"{db}.notify-key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(secrets.token_hex(32) + "\n")
    with open(path) as f:
        key = f.read().strip()
    if announce is not None:
        announce(os.path.abspath(path))
    return key.encode()


def _slack(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def notice(log: EventLog, record: Record, base_url: str) -> dict[str, Any] | None:
    """The notification `record` calls for (ApprovalPublished or ApprovalDecided), else None."""
    if record.type == "ApprovalPublished":
        kind = "requested"
    elif record.type == "ApprovalDecided":
        kind = OUTCOMES.get(record.data["decision"], "decided")
    else:
        return None
    first = next(iter(log.read(record.stream, 1, 1)), None)
    if first is None or first.type != "ApprovalRequested":
        return None
    a = first.data
    url = f"{base_url.rstrip('/')}/ui/approvals/{a['approval_id']}"
    approval = {
        "id": a["approval_id"], "run_id": a["run_id"], "kind": a["kind"], "title": a["title"],
        "detail": a["detail"][:DETAIL_LIMIT], "risk": a["risk"], "payload_sha256": a["payload_sha256"],
        "quorum": a["quorum"], "requested_at": a["requested_at"], "expires_at": a["expires_at"],
        "requested_by": a.get("requested_by", ""), "tool_call_id": a["tool_call_id"],
    }  # fmt: skip
    doc: dict[str, Any] = {
        "type": f"approval.{kind}", "id": record.event_id, "seq": record.seq,
        "at": record.recorded_at.isoformat(), "approval": approval, "url": url,
    }  # fmt: skip
    where = f"run {a['run_id']}" if a["run_id"] else "no run"
    if kind == "requested":
        text = f"Approval needed ({a['risk']} risk) for {where}: {a['title']}"
    else:
        d = record.data
        latency = record.recorded_at - datetime.fromisoformat(a["requested_at"])
        doc["decision"] = {
            "decision": d["decision"], "actor": d["actor"], "credential": d["identity"], "at": d["at"],
            "latency_ms": round(latency.total_seconds() * 1000, 3),
        }  # fmt: skip
        by = f" by {d['actor']}" + (f" ({d['identity']})" if d["identity"] else "")
        said = {"approve": "Approved", "reject": "Rejected", "expired": "Expired", "withdrawn": "Withdrawn"}
        verb = said.get(d["decision"], d["decision"]) + (by if kind == "decided" else "")
        text = f"{verb}: {a['title']} ({where})"
    doc["text"] = f"{_slack(text)} {url}"
    return doc


def body_of(doc: dict[str, Any]) -> bytes:
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
