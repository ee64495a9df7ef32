"""The CLI over the demo's own log: piped output is tab-separated and whole, payloads read as
JSON, narrow terminals keep who decided; `flightlog demo` fails in one line on a bad --db,
takes a free port when its default is busy, counts what the file holds and leaves it whole."""

from __future__ import annotations

import json
import pathlib
import shutil
import socket
import subprocess
import sys

import pytest

from eventlog import open_log

from .test_cli_tables import on_a_terminal

ROOT = pathlib.Path(__file__).resolve().parents[2]
BOXES = set("┃│┏┡└━─")


def flightlog(
    *args: str, cwd: pathlib.Path | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """`flightlog ARGS` piped (stdout is not a terminal), 80 columns."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "80", "HOME": str(cwd or ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", *args], cwd=cwd or ROOT, capture_output=True, text=True,
        timeout=180, env=env,
    )  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[pathlib.Path, str]:
    folder = tmp_path_factory.mktemp("demo")
    proc = flightlog("demo", "--auto", "--port", "0", "--db", "demo.db", cwd=folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return folder / "demo.db", proc.stdout


# -- 5. piped output is whole and tab-separated; payloads are JSON; who stays at 80 columns ----


@pytest.mark.parametrize(
    "args",
    [["timeline", "{db}", "deployer"], ["timeline", "{db}", "deployer", "--each"],
     ["travel", "{db}", "deployer", "--at", "20"],
     ["diff", "{db}", "deployer", "--from", "12", "--to", "30"]],
)  # fmt: skip
def test_piped_timeline_travel_and_diff_draw_no_boxes_and_cut_nothing(demo, args):
    db, _ = demo
    proc = flightlog(*[a.format(db=db) for a in args])
    assert proc.returncode in (0, 1), proc.stderr  # diff exits 1 when something changed
    out = proc.stdout
    assert not BOXES & set(out), out
    assert "…" not in out
    for line in out.splitlines():
        if "\t" in line and line[:4].isdigit():  # a timeline row: its time is whole, on one line
            assert line.split("\t")[0].endswith("Z"), line
    if args[0] == "diff":
        assert "kubectl rollout restart deploy/web" in out
    else:
        assert "\t" in out


def test_piped_events_are_tab_separated_with_every_byte_of_data(demo):
    db, _ = demo
    out = flightlog("events", str(db)).stdout
    with open_log(db, readonly=True) as log:
        records = list(log.read_all())
    lines = out.splitlines()
    assert len(lines) == len(records)
    long = 0
    for line, r in zip(lines, records, strict=True):
        seq, _, where, kind, data = line.split("\t")
        assert (int(seq), where, kind) == (r.seq, f"{r.stream}@{r.version}", r.type)
        shown = json.loads(data)
        assert set(shown) == set(r.data)
        long += len(data) > 160
        payload = r.data.get("payload")
        if isinstance(payload, str) and payload.startswith("{"):
            assert shown["payload"] == json.loads(payload)  # JSON, not JSON inside a string
        elif "payload" in r.data:
            assert shown["payload"] == payload
    assert long, "no record longer than 160 characters: the test shows nothing"


def test_at_80_columns_approvals_keep_who_decided(demo):
    db, _ = demo
    shown = on_a_terminal("approvals", str(db), "--all")
    assert all(len(line) <= 80 for line in shown.splitlines()), shown
    assert "actor" in shown
    assert "alice, bob" in shown


# -- 8. the demo ---------------------------------------------------------------------------


def test_the_demo_counts_what_the_file_holds_and_leaves_it_whole(demo, tmp_path):
    db, out = demo
    with open_log(db, readonly=True) as log:
        head = log.head().seq
    assert f"chain verified over {head} events" in out
    wal = pathlib.Path(f"{db}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    copy = tmp_path / "copy.db"
    shutil.copyfile(db, copy)  # the file alone, as `cp` copies it
    with open_log(copy, readonly=True) as log:
        assert log.head().seq == head


@pytest.mark.parametrize("bad", ["a-folder", "no-such-folder/demo.db"])
def test_a_bad_db_is_one_line_and_no_traceback(tmp_path, bad):
    (tmp_path / "a-folder").mkdir()
    proc = flightlog("demo", "--auto", "--port", "0", "--db", bad, cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert bad.split("/")[0] in proc.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "a-folder"]  # nothing created, nothing removed


def test_a_busy_default_port_is_traded_for_a_free_one(tmp_path):
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            busy.bind(("127.0.0.1", 8765))
        except OSError:
            pass  # already busy: all the better
        else:
            busy.listen()
        # The default port, not one asked for: `flightlog` runs the demo without FLIGHTLOG_DEMO_PORT.
        proc = flightlog("demo", "--auto", "--db", "demo.db", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "port 8765 is busy: took a free one instead" in proc.stdout
    assert "verify: ok" in proc.stdout


def test_a_busy_port_asked_for_is_an_error_not_a_surprise(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = flightlog("demo", "--auto", "--db", "demo.db", "--port", str(port), cwd=tmp_path)
    assert proc.returncode == 2
    assert "pass --port 0" in proc.stderr
    assert "Traceback" not in proc.stderr
