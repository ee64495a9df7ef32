"""Determinism: the same digests live, rebuilt in fresh processes, after a kill, and from snapshots.

A seeded mixed workload is appended while a Views follows it (live, storing snapshots and
keeping checkpoints); its digests, at the head and at the heads it passed on the way, are
the reference. Every other way of building the views must give them byte for byte.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from eventlog import ManualClock, open_log, snapshot_store
from projections import Views, default_views
from tools.bench.workload import bursts

ROOT = Path(__file__).resolve().parents[2]
RUNS = 16
SEED = 23
TIMEOUT = 120


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The workload appended burst by burst, with a Views caught up after every burst."""
    path = tmp_path_factory.mktemp("live") / "live.db"
    clock = ManualClock()
    log = open_log(path, clock=clock)
    views = Views(log, snapshot_every=100, checkpoint_every=50)
    marks: dict[int, dict[str, str]] = {}
    next_mark = 250
    for stream, events in bursts(RUNS, SEED, clock):
        log.append(stream, events)
        head = views.catch_up()
        if head >= next_mark:
            marks[head] = views.digests()  # the live state right now
            next_mark += 250
    final = views.digests()
    head = log.head().seq
    log.close()
    return {"path": path, "head": head, "digests": final, "marks": marks}


def worker(mode: str, path: Path, seqs: list[int], hashseed: str = "0") -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": hashseed}
    args = [sys.executable, "-m", "tests.travel.worker", mode, str(path), *map(str, seqs)]
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, timeout=TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    result: dict[str, Any] = orjson.loads(proc.stdout.splitlines()[-1])
    return result


def copy_without_snapshots(src: Path, dst: Path) -> Path:
    shutil.copy(src, dst)
    log = open_log(dst)
    snapshot_store(log).delete()
    log.close()
    return dst


def test_the_live_views_digest_every_view(live):
    assert live["head"] == RUNS * 100
    assert len(live["marks"]) >= 5
    assert set(live["digests"]) == {v.name for v in default_views()}


@pytest.mark.parametrize("hashseed", ["0", "12345"])
def test_a_fresh_process_rebuilds_the_live_digests(live, tmp_path, hashseed):
    path = copy_without_snapshots(live["path"], tmp_path / "fresh.db")
    seqs = sorted(live["marks"])
    result = worker("zero", path, seqs, hashseed)
    assert result["head"] == live["digests"]
    for seq in seqs:
        assert result["at"][str(seq)] == live["marks"][seq], f"at seq {seq}"


def test_a_rebuild_killed_midway_resumes_to_the_same_digests(live, tmp_path):
    path = copy_without_snapshots(live["path"], tmp_path / "killed.db")
    args = [sys.executable, "-m", "tests.travel.worker", "stall", str(path), "750"]
    proc = subprocess.Popen(
        args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed from inside the fold, at seq 750
        assert orjson.loads(line) == {"stalled": 750}, proc.stderr.read() if proc.stderr else b""
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=TIMEOUT) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    log = open_log(path)
    left = snapshot_store(log).list()
    log.close()
    assert left
    assert max(s.seq for s in left) == 700

    result = worker("resume", path, sorted(live["marks"]), "12345")
    assert result["head"] == live["digests"]
    for seq, digests in live["marks"].items():
        assert result["at"][str(seq)] == digests, f"at seq {seq}"
    assert max(result["restored"].values()) == 700  # it started from the killed one's snapshots


def test_snapshots_and_seq_zero_give_the_same_views(live, tmp_path):
    path = tmp_path / "snapshots.db"
    shutil.copy(live["path"], path)  # with the snapshots the live views stored
    seqs = sorted(live["marks"])
    from_snapshots = worker("resume", path, seqs)
    assert from_snapshots["restored"], "the rebuild should have started from snapshots"
    from_zero = worker("zero", path, seqs)
    assert from_snapshots["head"] == from_zero["head"] == live["digests"]
    assert from_snapshots["at"] == from_zero["at"]

    log = open_log(path)
    restored = Views(log)
    zero = Views(log, snapshots=None)
    for seq in [*seqs, 1, 99, 101, 1555]:
        assert restored.digests(at=seq) == zero.digests(at=seq), f"at seq {seq}"
    log.close()
