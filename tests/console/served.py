"""A `flightlog serve` process over a database file, for the console's browser tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .test_browser import ROOT


@contextmanager
def serving(db: Path, token: str) -> Iterator[str]:
    """Serve `db` with the bootstrap `token` on a free port; yield its URL, stop it on exit."""
    env = {**os.environ, "FLIGHTLOG_OPERATOR_TOKEN": token, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", "serve", "--db", str(db), "--port", "0"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        url = ""
        for line in proc.stdout:  # the server prints its address once it accepts connections
            found = re.search(r"listening on (http://\S+)", line)
            if found:
                url = found.group(1)
                break
        assert url, "flightlog serve did not start"
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        if proc.stdout is not None:
            proc.stdout.close()
