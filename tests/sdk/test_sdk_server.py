"""The SDK against a real `flightlog serve`: runs, reports, parallel gates, restarts, withdrawals."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import flightlog

from .conftest import OPERATOR_TOKEN, Served

pytestmark = pytest.mark.slow


def client(served: Served, **options) -> flightlog.Client:
    # The bootstrap admin's token is the credential that creates runs (POST /api/v1/runs).
    return flightlog.Client(served.url, token=OPERATOR_TOKEN, **options)


def decide_all(served: Served, run_id: str, request_ids: list[str]) -> dict[str, str]:
    """Alice approves the even requests, bob rejects the odd ones; request id -> decision."""
    pending = served.pending(run_id)
    wanted = {}
    for i, request_id in enumerate(request_ids):
        decision, operator = ("approve", "alice") if i % 2 == 0 else ("reject", "bob")
        response = served.decide(pending[request_id], decision, operator)
        assert response.status_code == 200, response.text
        wanted[request_id] = (decision, operator)
    return wanted


def test_twenty_parallel_gates_of_one_run_each_get_their_own_decision(served: Served):
    with client(served) as c, c.run("sdk-parallel") as run:
        request_ids = [f"call-{i}" for i in range(20)]
        for request_id in request_ids:  # filed first, so that the operators see all twenty
            run.request("Bash", {"command": f"echo {request_id}"}, request_id=request_id)
        started = threading.Barrier(21)

        def wait(request_id: str) -> flightlog.Decision:
            started.wait(30)
            return run.decision(request_id, timeout=60)

        with ThreadPoolExecutor(20) as pool:
            futures = {r: pool.submit(wait, r) for r in request_ids}
            started.wait(30)
            wanted = decide_all(served, "sdk-parallel", request_ids)
            decisions = {r: f.result(60) for r, f in futures.items()}
    for request_id, (decision, operator) in wanted.items():
        got = decisions[request_id]
        assert got.request_id == request_id
        assert got.allowed is (decision == "approve")
        assert got.outcome == ("allow" if decision == "approve" else "deny")
        assert got.decided_by == operator
        assert got.approval_id == served.history(got.approval_id)["id"]


def test_asyncio_gates_in_parallel(served: Served):
    request_ids = [f"async-{i}" for i in range(10)]

    async def main() -> dict[str, flightlog.Decision]:
        async with (
            flightlog.AsyncClient(served.url, token=OPERATOR_TOKEN) as c,
            c.run("sdk-async") as run,
        ):
            for request_id in request_ids:
                await run.request("Write", {"path": request_id}, request_id=request_id)
            waits = [asyncio.ensure_future(run.decision(r, timeout=60)) for r in request_ids]
            await asyncio.to_thread(decide_all, served, "sdk-async", request_ids)
            return dict(zip(request_ids, await asyncio.gather(*waits), strict=True))

    decisions = asyncio.run(main())
    assert [decisions[r].allowed for r in request_ids] == [i % 2 == 0 for i in range(10)]
    assert served.run("sdk-async")["finishes"][-1]["status"] == "done"


AGENT = """
import json, sys, flightlog
run = flightlog.Client(sys.argv[1]).run("sdk-restart", token=sys.argv[2])
run.request("deploy", {"env": "prod"}, request_id="deploy-1", risk="high")
print("filed", flush=True)
decision = run.gate("deploy", {"env": "prod"}, request_id="deploy-1", risk="high")
print(json.dumps({"allowed": decision.allowed, "by": decision.decided_by}), flush=True)
"""


def test_an_agent_killed_while_waiting_collects_the_decision_when_it_restarts(served: Served, tmp_path):
    with client(served) as c:
        token = c.run("sdk-restart").token
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    argv = [sys.executable, "-c", AGENT, served.url, token]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "filed"
        # The request is filed once its gate has answered the filing: it waits for a decision.
        approval_id = served.pending("sdk-restart")["deploy-1"]
    finally:
        first.kill()
        first.wait(30)
        if first.stdout is not None:
            first.stdout.close()
    assert served.decide(approval_id, "approve", "alice").status_code == 200
    # The same request id filed again with the same call is the same request: its decision comes.
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=True)
    assert json.loads(again.stdout.splitlines()[-1]) == {"allowed": True, "by": "alice"}


def test_a_withdrawn_request_shows_withdrawn_and_refuses_a_later_decision(served: Served):
    with client(served) as c, c.run("sdk-withdraw") as run:
        decision = run.gate("Bash", {"command": "rm -rf build"}, timeout=0.2)
        assert decision.outcome == "withdrawn"
        assert not decision.allowed
        assert decision.decided_by == "run:sdk-withdraw"
        assert decision.reason == "no decision within 0.2 s"
        with pytest.raises(flightlog.GateTimeout) as timed_out:
            run.gate("Bash", {"command": "ls"}, timeout=0.2, withdraw_on_timeout=False)
        still_open = timed_out.value.request_id
        assert still_open in served.pending("sdk-withdraw")
        assert run.withdraw(still_open, "not needed").reason == "not needed"
    row = served.history(decision.approval_id)
    assert (row["status"], row["decision"], row["actor"]) == ("withdrawn", "withdrawn", "run:sdk-withdraw")
    late = served.decide(decision.approval_id, "approve", "alice")
    assert late.status_code == 409
    assert late.json()["decision"] == "withdrawn"
    assert served.pending("sdk-withdraw") == {}


def test_the_run_block_reports_finishes_and_records_a_failure(served: Served):
    with client(served) as c:
        with c.run("sdk-report") as run:
            run.report("tool.start", {"tool": "ls", "args": ["-l"]})
        with pytest.raises(KeyError), c.run("sdk-fail"):
            raise KeyError("missing")
    reported = served.run("sdk-report")
    assert reported["reports"][0]["payload"] == {"tool": "ls", "args": ["-l"]}
    assert reported["finishes"][-1]["status"] == "done"
    failed = served.run("sdk-fail")["finishes"][-1]
    assert (failed["status"], failed["summary"]) == ("failed", "KeyError: 'missing'")


def test_the_gate_decorator_runs_the_function_only_when_allowed(served: Served):
    calls = []

    @flightlog.gate(risk="high", timeout=0.2)
    def deploy(env: str) -> str:
        calls.append(env)
        return env

    with client(served) as c, c.run("sdk-decorated"), pytest.raises(flightlog.GateDenied) as denied:
        deploy("prod")
    assert calls == []
    assert denied.value.decision.outcome == "withdrawn"


def test_ask_and_reply_between_runs(served: Served):
    with client(served) as c, c.run("sdk-asker") as asker, c.run("sdk-helper") as helper:

        def answer() -> None:
            while True:
                for message in helper.messages():
                    if message.expects_reply:
                        helper.reply(message, {"sum": message.body["a"] + message.body["b"]})
                        return

        thread = threading.Thread(target=answer)
        thread.start()
        reply = asker.ask("sdk-helper", {"data": {"a": 2, "b": 3}}, timeout=30)
        thread.join(30)
    assert reply.from_run_id == "sdk-helper"
    assert reply.payload["sum"] == 5


def test_typed_errors(served: Served):
    with client(served) as c:
        with pytest.raises(flightlog.Conflict):  # another run's token: not this run's to take
            c.run("sdk-report", token="0" * 32)
        with pytest.raises(flightlog.Unauthorized):
            flightlog.Run(c, "sdk-report", "0" * 32).report("x")
        with c.run("sdk-errors") as run, pytest.raises(flightlog.NotFound):
            run.decision("never-filed", timeout=1)
    with socket_closed() as url, flightlog.Client(url) as nowhere, pytest.raises(flightlog.ServerUnreachable):
        nowhere.run("nowhere")


def socket_closed():
    import contextlib
    import socket

    @contextlib.contextmanager
    def closed():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        yield f"http://127.0.0.1:{port}"  # nothing listens there any more

    return closed()
