"""The race: 2,000 approvals, four OS processes deciding all of them at once.

Exactly one ApprovalDecided per approval; every attempt either won or was told it lost;
the processes' claims, the log and the approval history all agree.
"""

from __future__ import annotations

import multiprocessing
import queue
import uuid
from collections import Counter
from datetime import timedelta

import pytest

from eventlog import NO_STREAM, decode, encode, open_log
from eventlog.events import ApprovalPublished, ApprovalRequested
from projections import Views

from .race_worker import work

APPROVALS = 2000
PROCESSES = 4
pytestmark = pytest.mark.slow


def _seed_approvals(path, clock):
    """Record APPROVALS published approvals straight through the log (what request() writes)."""
    now = clock.now()
    plan = []
    with open_log(path, clock=clock, synchronous="NORMAL") as log:
        for n in range(APPROVALS):
            id = str(uuid.uuid4())
            run = f"race-run-{n}"  # one approval per run: expire_run(run) targets just this one
            requested = ApprovalRequested(
                id, run, f"call-{n}", "shell", "Race", f"step {n}", "low", f"{n:064x}", False, 1,
                now, now + timedelta(hours=1), "race",
            )  # fmt: skip
            events = [encode(requested), encode(ApprovalPublished(id, now))]
            log.append(f"approval-{id}", events, expect=NO_STREAM)
            plan.append((id, run))
    return plan


def test_four_processes_decide_each_approval_exactly_once(db_path, clock):
    plan = _seed_approvals(db_path, clock)
    ctx = multiprocessing.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=work, args=(n, str(db_path), clock.now().isoformat(), plan, 1000 + n, go, out))
        for n in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    results = {}
    try:
        ready = 0
        while len(results) < PROCESSES:
            kind, n, value = out.get(timeout=90)
            assert kind != "error", f"process {n} failed: {value}"
            if kind == "ready":
                ready += 1
                if ready == PROCESSES:
                    go.set()  # all four opened their System: start together
            else:
                results[n] = value
    except queue.Empty:
        pytest.fail(f"processes did not report in time; got {sorted(results)}")
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in procs] == [0] * PROCESSES

    # Every attempt won or was told it lost; one winner per approval, over all processes.
    for n, r in results.items():
        counts = Counter(r["counts"])
        lost = sum(v for k, v in counts.items() if k.startswith("lost:"))
        assert counts["attempts"] == APPROVALS
        assert counts["won"] + lost == counts["attempts"], (n, counts)
        assert counts["lost:resolving"] == 0  # one thread per process: no in-process overlap
        assert sorted(r["hooked"]) == sorted(r["won"])  # on_resolved ran once per win, here only
    claims = Counter(id for r in results.values() for id in r["won"])
    assert set(claims) == {id for id, _ in plan}
    assert max(claims.values()) == 1

    # The log agrees: one decision per approval, by the process that claimed it.
    with open_log(db_path) as log:
        decided, refused = {}, Counter()
        for record in log.read_all():
            if record.type == "ApprovalDecided":
                event = decode(record)
                assert event.approval_id not in decided, f"{event.approval_id} decided twice"
                decided[event.approval_id] = (event.decision, event.actor)
            elif record.type == "ApprovalDecisionRefused":
                refused[record.stream_id] += 1
        assert len(decided) == APPROVALS
        for n, r in results.items():
            for id, decision in r["won"].items():
                actor = f"abort-p{n}" if decision == "expired" else f"p{n}"
                assert decided[id] == (decision, actor)
        # Each told-loser of a resolve left an audit record of its attempt; expiries leave none.
        told = sum(r["counts"].get("lost:not_pending", 0) for r in results.values())
        assert sum(refused.values()) == told
        assert log.verify().ok

        # And so does the approval history, rebuilt from the log.
        rows = {row.id: row for row in Views(log).approval_history()}
        assert {id: (row.status, row.actor) for id, row in rows.items()} == decided
        assert {id: len(row.refused) for id, row in rows.items() if row.refused} == dict(refused)
        assert Views(log).pending_approvals() == []
