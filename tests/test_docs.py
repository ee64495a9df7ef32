"""Every fenced `bash` and `python` block of README.md and docs/*.md runs, so the docs cannot drift.

A block runs in a fresh folder that holds the database `flightlog demo --auto` leaves
(`flightlog-demo.db`), with `flightlog` on the PATH; it passes when it exits 0. An HTML
comment right before a block says how else it is run:

- `<!-- with a server -->`: a fresh `flightlog serve` started by the test stands in for the block's
  own (`localhost:8080` and `127.0.0.1:8080` name it; its lines `flightlog serve … &` and
  `export FLIGHTLOG_OPERATOR_TOKEN=…` are left out, the test's token being in the environment);
- `<!-- run by: tests/PATH.py … -->`: that test runs it (it needs more than a server, an
  operator deciding its gates, say); the file must exist and name the document;
- `<!-- not run: why -->`: it cannot run here (a systemd unit, `pip install`); the test counts
  them and prints the list, so what is not run is in plain sight.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from tests.http.server import ServerProcess

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = ("bash", "python")
MARKER = r"(?:<!--[ \t]*(?P<marker>[^\n]*?)[ \t]*-->[ \t]*\n)?"  # one line, right before the fence
FENCE = re.compile(MARKER + r"```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```", re.S | re.M)
TOKEN = "docs-operator-3f9b1c7e5a20d864-secret"
TIMEOUT = 120  # seconds a block may take; the demo itself takes a few


class Block(NamedTuple):
    doc: str  # its file, relative to the repository
    line: int
    lang: str
    code: str
    marker: str

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for m in FENCE.finditer(text):
            if m.group("lang") in RUN:
                line = text.count("\n", 0, m.start("lang")) + 1
                rel = str(path.relative_to(ROOT))
                found.append(Block(rel, line, m.group("lang"), m.group("code"), m.group("marker") or ""))
    return found


ALL = blocks()
RUNNABLE = [b for b in ALL if not b.marker.startswith(("not run:", "run by:"))]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("docs-demo")
    proc = subprocess.run(
        [sys.executable, "-m", "tools.cli", "demo", "--auto", "--port", "0"],
        cwd=folder, capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder / "flightlog-demo.db"


@pytest.fixture
def server(tmp_path_factory) -> Iterator[ServerProcess]:
    """A fresh server per block: a block may enrol alice or create run r1, as if it were alone."""
    db = tmp_path_factory.mktemp("docs-server") / "flightlog.db"
    served = ServerProcess(db, TOKEN, ("--no-access-log",), registration="enrolled")
    try:
        yield served
    finally:
        served.close()


def with_server(code: str, url: str) -> str:
    """The block as run beside the test's server: its own server and token lines left out."""
    address = url.removeprefix("http://")
    kept = [
        line
        for line in code.splitlines()
        if not re.match(r"\s*flightlog serve\b.*&\s*(#.*)?$", line)
        and not line.lstrip().startswith("export FLIGHTLOG_OPERATOR_TOKEN=")
    ]
    text = "\n".join(kept) + "\n"
    return text.replace("localhost:8080", address).replace("127.0.0.1:8080", address)


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_the_block_runs(block: Block, demo_db, request, tmp_path):
    shutil.copyfile(demo_db, tmp_path / "flightlog-demo.db")
    env = {
        "PATH": f"{pathlib.Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path),
        "COLUMNS": "120",
    }
    code = block.code
    if block.marker == "with a server":
        served: ServerProcess = request.getfixturevalue("server")
        code = with_server(code, served.url)
        env["FLIGHTLOG_OPERATOR_TOKEN"] = TOKEN
        env["FLIGHTLOG_URL"] = served.url
    else:
        assert not block.marker, f"{block.id}: unknown marker <!-- {block.marker} -->"
    argv = ["bash", "-euo", "pipefail", "-c", code] if block.lang == "bash" else [sys.executable, "-c", code]
    proc = subprocess.run(
        argv, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT, env=env
    )
    assert proc.returncode == 0, f"{block.id} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"


def test_what_is_not_run_here_is_marked_and_listed(capsys):
    skipped = [b for b in ALL if b.marker.startswith("not run:")]
    elsewhere = [b for b in ALL if b.marker.startswith("run by:")]
    for b in elsewhere:
        path = b.marker.removeprefix("run by:").split()[0]
        assert (ROOT / path).is_file(), f"{b.id}: {path} does not exist"
        assert pathlib.Path(b.doc).name in (ROOT / path).read_text(), f"{path} does not read {b.doc}"
    with capsys.disabled():
        counts = f"{len(RUNNABLE)} block(s) run here, {len(elsewhere)} by other tests, {len(skipped)} not run"
        print(f"\ndocs: {counts}:")
        for b in skipped:
            print(f"  {b.id}: {b.marker.removeprefix('not run:').strip()}")
    assert RUNNABLE, "no block to run: the pattern no longer finds them"
    for b in skipped:
        assert b.marker.removeprefix("not run:").strip(), f"{b.id}: say why it is not run"


LINK = re.compile(r"\]\((?!https?:|mailto:)([^)#\s]+)(?:#([\w-]+))?\)")


def anchors(path: pathlib.Path) -> set[str]:
    """The anchors GitHub gives a page's headings."""
    heads = re.findall(r"^#+ (.+)$", path.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_link_names_a_file_and_heading_that_exist(doc: pathlib.Path):
    for target, anchor in LINK.findall(doc.read_text()):
        path = (doc.parent / target).resolve()
        assert path.exists(), f"{doc.name}: {target} does not exist"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{doc.name}: {target}#{anchor} names no heading"
    for anchor in re.findall(r"\]\(#([\w-]+)\)", doc.read_text()):
        assert anchor in anchors(doc), f"{doc.name}: #{anchor} names no heading"
