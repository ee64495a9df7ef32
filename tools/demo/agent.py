"""A demo agent process that speaks the broker's HTTP wire protocol (stdlib only).

It registers its run, reports progress, asks an operator for permission before each risky
step, asks its peer for a review and waits for the reply (or answers the peer's ask), and
finishes `done` (or `failed` when a permission was denied).
Run it as `python tools/demo/agent.py --url http://127.0.0.1:PORT --run-id NAME --peer OTHER`;
the token of the run an operator created for it is read from the FLIGHTLOG_RUN_TOKEN
environment variable (never argv); without one, only a server open to self-registration
(`flightlog serve --registration open`) takes it.
"""

from __future__ import annotations

import signal

if __name__ == "__main__":
    # Ctrl-C in the demo's terminal reaches this process too: end at once, without a traceback,
    # even while the imports below still run (hence before them).
    signal.signal(signal.SIGINT, signal.SIG_DFL)

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any

PEER_WAIT = 30.0  # seconds to wait for the peer run to register before messaging it fails
WAIT_REPLY = 20.0  # seconds one /wait_reply may hold; a wait cut short is asked again
# Each step: (report state, permission request or None, what it does when allowed).
PLANS: dict[str, list[dict[str, Any]]] = {
    "deployer": [
        {"state": "working", "note": "reading the release notes"},
        {
            "state": "working",
            "note": "preparing the rollout",
            "permission": {
                "tool_name": "bash",
                "description": "Run: kubectl rollout restart deploy/web",
                "input_preview": "kubectl rollout restart deploy/web",
            },
        },
        {
            "state": "working",
            "note": "asking the reviewer",
            "message": "rollout restarted; please check the logs",
            "ask": True,
        },
    ],
    "reviewer": [
        {"state": "thinking", "note": "waiting for the deployer's message", "wait_message": True},
        {
            "state": "working",
            "note": "writing the review",
            "permission": {
                "tool_name": "write",
                "description": "Write /etc/motd",
                "input_preview": "Deployed by flightlog demo",
            },
            "reply": "the logs look fine",
        },
    ],
}


class Client:
    def __init__(self, url: str, run_id: str) -> None:
        self.url = url.rstrip("/")
        self.run_id = run_id
        self.token = ""

    def post(self, path: str, body: dict[str, Any], timeout: float = 10.0) -> Any:
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
        return json.loads(raw) if raw and raw[:1] in b"[{n" else raw.decode()

    def authed(self, path: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> Any:
        return self.post(path, {"run_id": self.run_id, "token": self.token, **(body or {})}, timeout)

    def register(self, token: str) -> None:
        answer = self.post("/register", {"run_id": self.run_id, "token": token})
        self.token = answer["token"]

    def report(self, state: str, payload: dict[str, Any]) -> None:
        self.authed("/report", {"state": state, "payload": payload})

    def poll(self) -> list[dict[str, Any]]:
        messages = self.authed("/poll-control", timeout=15.0)
        return messages or []


def send_when_registered(client: Client, peer: str, payload: dict[str, Any]) -> None:
    """Message `peer`, waiting (up to PEER_WAIT seconds) for it to register if it has not yet:
    the broker answers 404 for a run it does not know, and the peer may still be starting."""
    deadline = time.monotonic() + PEER_WAIT
    body = {"from_run_id": client.run_id, "to_run_id": peer, "type": "agent_message", "payload": payload}
    while True:
        try:
            client.authed("/send", body)
            return
        except urllib.error.HTTPError as e:
            if e.code != 404 or time.monotonic() > deadline:
                raise
            e.close()
        time.sleep(0.1)


def wait_reply(client: Client, message_id: str) -> dict[str, Any]:
    """The answer to our ask: the reply, `cancelled` or `timeout` (a wait cut short is asked again:
    the broker keeps the ask open until its deadline)."""
    while True:
        try:
            answer: dict[str, Any] = client.authed("/wait_reply", {"waiting_for": message_id}, WAIT_REPLY)
            return answer
        except urllib.error.HTTPError as e:
            if e.code != 504:
                raise
            e.close()
            return {"timeout": True, "message_id": message_id}
        except TimeoutError:
            continue


def wait_for_decision(client: Client, request_id: str, inbox: list[dict[str, Any]]) -> str:
    """Poll the control queue until the operator's answer for `request_id` arrives."""
    while True:
        for message in client.poll():
            payload = message.get("payload") or {}
            if message.get("type") == "permission_decision" and payload.get("request_id") == request_id:
                return str(payload.get("behavior", "deny"))
            inbox.append(message)


def wait_for_agent_message(client: Client, inbox: list[dict[str, Any]]) -> dict[str, Any]:
    """The first agent_message in the inbox or on the control queue."""
    while True:
        for i, message in enumerate(inbox):
            if message.get("type") == "agent_message":
                return inbox.pop(i)
        inbox.extend(client.poll())


def run(url: str, run_id: str, peer: str, role: str) -> int:
    client = Client(url, run_id)
    client.register(os.environ.get("FLIGHTLOG_RUN_TOKEN", ""))
    inbox: list[dict[str, Any]] = []
    denied = []
    message: dict[str, Any] | None = None  # the peer's message, once heard
    for i, step in enumerate(PLANS[role]):
        client.report(step["state"], {"step": i + 1, "note": step["note"]})
        if step.get("wait_message"):
            message = wait_for_agent_message(client, inbox)
            client.report(
                "working",
                {
                    "step": i + 1,
                    "heard_from": message.get("from_run_id", ""),
                    "message": (message.get("payload") or {}).get("message", ""),
                },
            )
        permission = step.get("permission")
        if permission:
            request_id = f"{run_id}-perm-{i + 1}"
            client.authed("/permission_request", {"request_id": request_id, **permission})
            behavior = wait_for_decision(client, request_id, inbox)
            client.report("working", {"step": i + 1, "permission": request_id, "behavior": behavior})
            if behavior != "allow":
                denied.append(permission["description"])
        if step.get("message") and peer:
            question: dict[str, Any] = {"message": step["message"]}
            if step.get("ask"):
                question |= {"id": f"{run_id}-ask-{i + 1}", "expects_reply": True}
            send_when_registered(client, peer, question)
            if step.get("ask"):
                answer = wait_reply(client, question["id"])
                said = (answer.get("payload") or {}).get("message", "") if "payload" in answer else ""
                client.report(
                    "working",
                    {
                        "step": i + 1,
                        "answer_from": answer.get("from_run_id", ""),
                        "answer": said or str(answer),
                    },
                )
        if step.get("reply") and message is not None:
            asked = message.get("payload") or {}
            if asked.get("expects_reply") and asked.get("id"):
                said = step["reply"] if not denied else f"not reviewed: {'; '.join(denied)}"
                reply = {"reply_to": asked["id"], "message": said}
                body = {"from_run_id": run_id, "to_run_id": message["from_run_id"], "type": "agent_message"}
                client.authed("/send", {**body, "payload": reply})
    status = "failed" if denied else "done"
    summary = f"denied: {'; '.join(denied)}" if denied else f"{role} finished all steps"
    client.authed("/finish", {"status": status, "summary": summary, "files_changed": []})
    print(json.dumps({"run_id": run_id, "status": status, "summary": summary}), flush=True)
    return 0


def harness_main() -> int:
    """JSON-lines mode for a CommandHarness: one reconcile that needs an operator quorum."""

    def emit(event: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    pending: dict[str, str] = {}
    for line in sys.stdin:
        op = json.loads(line)
        if op.get("op") == "permission":
            pending[op["id"]] = op["decision"]
            continue
        if op.get("op") != "prompt":
            continue
        run_id = op["run_id"]
        emit({"type": "user.message", "run_id": run_id, "data": {"content": op["prompt"]}})
        emit({"type": "assistant.delta", "run_id": run_id, "data": {"delta": "Planning the change… "}})
        intent = {"service": "web", "replicas": 3}
        ask_id = f"ask-{run_id}"
        emit(
            {
                "type": "permission.request",
                "run_id": run_id,
                "id": ask_id,
                "data": {
                    "tool_call_id": f"reconcile-{run_id}",
                    "requires_fleet_quorum": True,
                    "title": "Scale web to 3 replicas",
                    "risk": "high",
                    "input": intent,
                },
            }
        )
        decision = ""
        while not decision:
            answer = json.loads(sys.stdin.readline() or "{}")
            if not answer:
                return 1
            if answer.get("op") == "permission":
                decision = answer["decision"] if answer["id"] == ask_id else ""
        if decision == "approve":
            emit(
                {
                    "type": "tool.start",
                    "run_id": run_id,
                    "data": {
                        "tool_call_id": f"reconcile-{run_id}",
                        "tool_name": "reconcile",
                        "arguments": intent,
                    },
                }
            )
            text = "Scaled web to 3 replicas."
        else:
            text = f"The operators answered {decision}; nothing was changed."
        emit({"type": "assistant.message", "run_id": run_id, "data": {"content": text}})
        emit({"type": "session.idle", "run_id": run_id})
    return 0


def main(argv: list[str] | None = None) -> int:
    if (argv is None and sys.argv[1:] == ["--harness"]) or argv == ["--harness"]:
        return harness_main()
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--peer", default="")
    parser.add_argument("--role", choices=sorted(PLANS), required=True)
    args = parser.parse_args(argv)
    try:
        return run(args.url, args.run_id, args.peer, args.role)
    except (urllib.error.URLError, OSError) as e:
        print(f"demo agent {args.run_id}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
