"""docs/integrations.md's examples run against a real server, an operator approving their gates."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from .conftest import OPERATOR_TOKEN, Operator, Served, reports

pytestmark = pytest.mark.slow
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
# What each example prints when it ran to its end, and what its runs recorded.
EXPECTED = [
    ("shipped", {"ship-lg-1": {"langgraph.gate", "langgraph.checkpoint", "langgraph.node.end"}}),
    (
        "['prod', 'prod'] shipped again",
        {"ship-lg-2": {"langgraph.gate"}, "ship-lg-2-again": {"langgraph.gate", "tool.complete"}},
    ),
    ("shipped", {"ship-oa-1": {"agents.trace", "agents.agent", "agents.turn", "agents.function"}}),
]


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)


def test_every_example_is_run_here():
    assert len(examples()) == len(EXPECTED)


@pytest.mark.parametrize("index", range(len(EXPECTED)))
def test_each_example_runs(served: Served, index: int, tmp_path):
    code = examples()[index]
    printed, recorded = EXPECTED[index]
    run_ids = re.findall(r'run\("([^"]+)"\)', code)
    assert set(run_ids) == set(recorded)
    env = {**os.environ, "FLIGHTLOG_URL": served.url, "FLIGHTLOG_TOKEN": OPERATOR_TOKEN}
    env.pop("OPENAI_API_KEY", None)  # the scripted model needs none: prove it
    script = tmp_path / "example.py"
    script.write_text(code)
    with Operator(served, lambda tool, request_id: ("approve", "looks right"), *run_ids) as alice:
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(printed), done.stdout
    assert alice.decided, "the example filed no gate"
    for run_id, states in recorded.items():
        assert states <= {state for state, _ in reports(served, run_id)}, run_id
