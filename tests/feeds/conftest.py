"""Fixtures of the feeds' tests: the demo's log, built once per session by `flightlog demo`."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory):
    """The demo's log: two broker runs (an ask between them, two permission requests, reports)
    and a controller run (a reconcile tool call behind a two-person approval). Read-only."""
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    argv = [sys.executable, "-c", "from tools.cli import main; main()", "demo", "--auto", "--db", str(path)]
    subprocess.run(argv, check=True, capture_output=True, timeout=120)
    return path
