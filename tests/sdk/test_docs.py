"""docs/sdk.md's Python examples run against a real server, an operator deciding their gates."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from .conftest import OPERATOR_TOKEN, Served

pytestmark = pytest.mark.slow
DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "sdk.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.DOTALL)


def test_the_gate_example_is_at_most_five_lines():
    gate = blocks("python")[0]
    assert len([line for line in gate.splitlines() if line.strip()]) <= 5, gate


@pytest.mark.parametrize("index", range(3))
def test_each_python_example_runs(served: Served, index: int, tmp_path):
    code = blocks("python")[index]
    run_ids = re.findall(r'run\("([^"]+)"\)', code)
    env = {**os.environ, "FLIGHTLOG_URL": served.url, "FLIGHTLOG_TOKEN": OPERATOR_TOKEN}
    script = tmp_path / "example.py"
    script.write_text(code)
    process = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    decided: set[str] = set()
    # Alice approves each gate as it shows; each question to the API paces the next.
    while process.poll() is None:
        for run_id in run_ids:
            for approval_id in set(served.pending(run_id).values()) - decided:
                served.decide(approval_id, "approve", "alice")
                decided.add(approval_id)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert decided, "the example filed no gate"
    assert "allow" in out or "deploying" in out
