"""Long polling: it waits for a push, answers `[]` after its timeout, and holds no thread while waiting."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import anyio.to_thread
import httpx
import orjson

from actors import ControlMessage

from .conftest import TEST_POLL_TIMEOUT


def test_an_empty_poll_waits_for_its_timeout(client, register):
    token = register("a")
    started = time.monotonic()
    assert client.post("/poll-control", json={"run_id": "a", "token": token}).json() is None
    assert time.monotonic() - started >= TEST_POLL_TIMEOUT


def test_a_waiting_poll_wakes_on_a_push(make_client, register, system, monkeypatch):
    # A 60 s poll timeout: if the push did not wake the poll, the test would time out
    # instead of passing, so it cannot pass by accident.
    client = make_client(poll_timeout=60.0)
    token = register("a")
    waiting = threading.Event()
    take = system.broker.call_take_as_run

    def take_and_tell(run_id, token, done):
        def answered():
            done()
            waiting.set()  # the poll found the queue empty (nothing was pushed yet): it waits

        return take(run_id, token, answered)

    monkeypatch.setattr(system.broker, "call_take_as_run", take_and_tell)
    result: list[Any] = []
    poller = threading.Thread(
        target=lambda: result.append(
            client.post("/poll-control", json={"run_id": "a", "token": token}).json()
        )
    )
    poller.start()
    assert waiting.wait(10)
    started = time.monotonic()
    system.broker.push_control("a", ControlMessage("m1", "steer", "a"))
    poller.join(20)
    assert not poller.is_alive()
    assert [m["id"] for m in result[0]] == ["m1"]
    assert time.monotonic() - started < 20


def test_a_disconnected_poller_gets_no_answer_and_takes_nothing(make_app, portal, register, system):
    token = register("a")
    app = make_app(poll_timeout=60.0)
    sent: list[dict[str, Any]] = []
    body = orjson.dumps({"run_id": "a", "token": token})

    async def go() -> None:
        messages = [{"type": "http.request", "body": body, "more_body": False}, {"type": "http.disconnect"}]

        async def receive():
            return messages.pop(0)

        async def send(message):
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/poll-control",
            "raw_path": b"/poll-control",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"content-type", b"application/json")],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        with anyio.fail_after(10):  # not 60: the disconnect ends the wait
            await app(scope, receive, send)

    portal.call(go)
    assert sent == []
    system.broker.push_control("a", ControlMessage("m1", "steer", "a"))
    assert system.broker.queue_depth("a") == 1  # nobody took it for the departed poller
    assert not system.broker.has_waiters("a")  # and its queue listener is gone


def test_waiting_polls_hold_no_thread(make_app, portal, register, system, monkeypatch):
    polls = 8
    tokens = {f"r{i}": register(f"r{i}") for i in range(polls)}
    app = make_app(poll_timeout=60.0)
    subscribed = threading.Semaphore(0)
    on_control = system.broker.on_control

    def counting(run_id, fn):
        unsubscribe = on_control(run_id, fn)
        subscribed.release()
        return unsubscribe

    monkeypatch.setattr(system.broker, "on_control", counting)

    async def go() -> list[list[dict[str, Any]]]:
        # Two worker threads for eight waiting polls: if a waiting poll held a thread, the
        # heartbeat below could not run until a poll timed out, 60 s from now.
        anyio.to_thread.current_default_thread_limiter().total_tokens = 2
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            tasks = [
                asyncio.ensure_future(c.post("/poll-control", json={"run_id": r, "token": t}))
                for r, t in tokens.items()
            ]
            for _ in range(polls):
                await anyio.to_thread.run_sync(subscribed.acquire)
            with anyio.fail_after(20):
                beat = await c.post("/heartbeat", json={"run_id": "r0", "token": tokens["r0"]})
            assert beat.status_code == 200
            for run_id in tokens:
                await anyio.to_thread.run_sync(system.broker.send, run_id, "steer", b"{}")
            with anyio.fail_after(20):
                responses = await asyncio.gather(*tasks)
        return [r.json() for r in responses]

    results = portal.call(go)
    assert [[m["run_id"] for m in r] for r in results] == [[f"r{i}"] for i in range(polls)]


def test_concurrent_polls_of_one_run_share_its_messages_exactly_once(make_client, register, system):
    pollers = 2
    client = make_client(poll_timeout=0.5)
    token = register("a")
    for i in range(20):
        system.broker.push_control("a", ControlMessage(f"m{i}", "t", "a"))
    results: list[list[dict[str, Any]]] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(
                client.post("/poll-control", json={"run_id": "a", "token": token}).json()
            )
        )
        for _ in range(pollers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    ids = [m["id"] for r in results for m in r or []]  # an empty poll is null
    assert sorted(ids) == sorted(f"m{i}" for i in range(20))
