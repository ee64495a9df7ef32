"""Latency workloads of `flightlog bench broker`: push → poll deliveries and ask → reply round trips.

Both run against a served broker (`broker.served`), one message in flight at a time.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import click
import orjson

from .broker_client import WAIT, Agent, Connection

# -- delivery ----------------------------------------------------------------------------------


def delivery(team: list[Agent], operator: Connection, pushes: int) -> list[float]:
    """Seconds from each push's send to the answer of the poll that carries it."""
    arrived: dict[str, float] = {}
    landed = threading.Condition()
    stop = threading.Event()
    errors: list[BaseException] = []

    def poller(a: Agent) -> None:
        body = orjson.dumps({"run_id": a.run_id, "token": a.token})
        try:
            while not stop.is_set():
                status, answer = a.conn.post("/poll-control", body)
                now = time.perf_counter()
                if status != 200:
                    raise click.ClickException(f"/poll-control answered {status}")
                messages = orjson.loads(answer) or []
                if messages:
                    with landed:
                        for m in messages:
                            arrived[m["id"]] = now
                        landed.notify_all()
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(e)
            with landed:
                landed.notify_all()

    def push(i: int) -> float:
        a = team[i % len(team)]
        message_id = f"m{i}"
        message = {"id": message_id, "type": "steer", "run_id": a.run_id, "payload": {"n": i}}
        sent = time.perf_counter()
        operator.call("/push-control", message)
        with landed:
            if not landed.wait_for(lambda: message_id in arrived or bool(errors), WAIT):
                raise click.ClickException(f"message {message_id} was never delivered")
        if errors:
            raise errors[0]
        return arrived[message_id] - sent

    threads = [threading.Thread(target=poller, args=(a,), daemon=True) for a in team]
    for thread in threads:
        thread.start()
    try:
        for i in range(len(team)):  # warm-up: each agent's first delivery is not counted
            push(-1 - i)
        return [push(i) for i in range(pushes)]
    finally:
        stop.set()
        # Each poll still waiting ends with a last message (or its own timeout).
        for k, a in enumerate(team):
            with contextlib.suppress(click.ClickException):
                operator.call("/push-control", {"id": f"stop{k}", "type": "stop", "run_id": a.run_id})
        for thread in threads:
            thread.join(WAIT)


def asks(team: list[Agent], count: int) -> list[float]:
    """Seconds from each ask to its reply in /wait_reply, between two agents of `team`."""
    asker, answerer = team[0], team[1]
    stop = threading.Event()
    errors: list[BaseException] = []

    def answer() -> None:
        creds: dict[str, Any] = {"run_id": answerer.run_id, "token": answerer.token}
        try:
            while not stop.is_set():
                status, body = answerer.conn.post("/poll-control", orjson.dumps(creds))
                if status != 200:
                    raise click.ClickException(f"/poll-control answered {status}")
                for m in orjson.loads(body) or []:
                    question = m.get("payload") or {}
                    if m["type"] != "agent_message" or not question.get("expects_reply"):
                        continue
                    reply = {"reply_to": question["id"], "message": "yes"}
                    sent = {**creds, "from_run_id": answerer.run_id, "to_run_id": asker.run_id}
                    sent |= {"type": "agent_message", "payload": reply}
                    status, _ = answerer.conn.post("/send", orjson.dumps(sent))
                    if status != 200:
                        raise click.ClickException(f"/send (reply) answered {status}")
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(e)

    thread = threading.Thread(target=answer, name="bench-answerer", daemon=True)
    thread.start()
    creds: dict[str, Any] = {"run_id": asker.run_id, "token": asker.token}
    samples = []
    try:
        for i in range(count):
            question = {"id": f"ask-{i}", "message": "ready?", "expects_reply": True}
            body = {**creds, "from_run_id": asker.run_id, "to_run_id": answerer.run_id}
            body |= {"type": "agent_message", "payload": question}
            start = time.perf_counter()
            status, _ = asker.conn.post("/send", orjson.dumps(body))
            if status != 200:
                raise click.ClickException(f"/send (ask) answered {status}")
            status, _ = asker.conn.post("/wait_reply", orjson.dumps({**creds, "waiting_for": f"ask-{i}"}))
            if status != 200:
                raise click.ClickException(str(errors[0]) if errors else f"/wait_reply answered {status}")
            samples.append(time.perf_counter() - start)
    finally:
        stop.set()
        thread.join(WAIT)
    if errors:
        raise errors[0]
    return samples
