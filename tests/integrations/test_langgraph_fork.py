"""A LangGraph run forked at a rejected approval, approved in the fork: resumed from the checkpoint
recorded before the gated call, the graph deploys and finishes, and nothing before it runs again."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest
from langchain_core.messages import AIMessage, HumanMessage

import flightlog
from flightlog.integrations import langgraph as fl
from flightlog.integrations.checkpoints import resume_config, resume_point

from .conftest import OPERATOR_TOKEN, Operator, client, records, reports
from .test_langgraph import Shipper, reject_all, ship_script

pytestmark = pytest.mark.slow

ADMIN = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def test_the_fork_at_a_rejected_deploy_approves_it_and_runs_only_the_deploy(served):
    shipper = Shipper(*ship_script("lg-fk"), AIMessage("gave up"), AIMessage("shipped in the fork"))
    config = {"configurable": {"thread_id": "lg-fk"}}
    with client(served) as c, c.run("lg-fk"), Operator(served, reject_all, "lg-fk") as bob:
        fl.invoke(shipper.graph, {"messages": [HumanMessage("ship it")]}, config)
    assert bob.decided == {"lg-fk-2": "reject"}
    assert shipper.calls == {"run_tests": 1, "deploy": 0}
    [request] = served.run("lg-fk")["permission_requests"]

    # The operator forks the run at that approval: the other decision, approve, is theirs.
    body = {"at_approval": request["approval_id"], "reason": "ship it"}
    response = served.http.post("/api/v1/runs/lg-fk/fork", json=body, headers=ADMIN)
    assert response.status_code == 201, response.text
    answer = response.json()
    fork = answer["fork"]
    assert (fork["kind"], fork["decision"], fork["recorded"], fork["request_id"]) == (
        "broker", "approve", "reject", "lg-fk-2"
    )  # fmt: skip
    # The fork's history holds the origin's steps up to the gate, and so its resume point.
    copied = [state for state, _ in reports(served, fork["run_id"])]
    assert copied == [state for state, _ in reports(served, "lg-fk")][: len(copied)]
    assert fl.GATE in copied
    assert "tool.complete" not in copied[copied.index(fl.GATE) :]  # the refused call's answer is not copied
    with client(served) as c:
        resume = resume_config(c, fork["run_id"], approval_id=fork["fork_approval_id"])
        assert resume == resume_config(c, "lg-fk", approval_id=request["approval_id"])

    # The fork's agent: the same graph, resumed there, on the new run's token; no operator is asked.
    shipper.agent.script = [AIMessage("shipped in the fork")]
    with flightlog.Client(served.url) as agent, agent.run(fork["run_id"], token=answer["token"]):
        final = fl.invoke(shipper.graph, None, resume)
    assert final["messages"][-1].content == "shipped in the fork"
    assert shipper.calls == {"run_tests": 1, "deploy": 1}  # run_tests ran once, in the origin only
    ran = reports(served, fork["run_id"])[len(copied) :]
    assert [(s, p["tool"]) for s, p in ran if s.startswith("tool.")] == [
        ("tool.start", "deploy"), ("tool.complete", "deploy")
    ]  # fmt: skip
    assert served.pending(fork["run_id"]) == {}  # the decision was the fork's, taken before it
    [decided] = served.run(fork["run_id"])["permission_requests"]
    assert (decided["request_id"], decided["behavior"]) == ("lg-fk-2", "allow")
    rows = records(served, fork["run_id"])
    assert [r["data"]["status"] for r in rows if r["type"] == "RunFinished"] == ["done"]  # it finished
    opening = next(r for r in rows if r["type"] == "RunForked")
    assert (opening["data"]["origin_run_id"], opening["data"]["decided_by"]) == ("lg-fk", "bootstrap")
    assert resume_point(rows, request_id="lg-fk-2").source == "gate"


def test_the_example_in_integrations_md_forks_and_resumes(served, tmp_path):
    """docs/integrations.md's "Resuming a fork at a gated call", run as a program against a server."""
    [code] = re.findall(r"```python fork\n(.*?)```", DOC.read_text(), re.DOTALL)
    script = tmp_path / "fork_example.py"
    script.write_text(code)
    env = {**os.environ, "FLIGHTLOG_URL": served.url, "FLIGHTLOG_TOKEN": OPERATOR_TOKEN}
    with Operator(served, reject_all, "ship-lg-3") as bob:
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "{'run_tests': 1, 'deploy': 1} shipped in the fork"
    assert bob.decided == {"call-2": "reject"}  # the origin's only; the fork's was decided by forking it
