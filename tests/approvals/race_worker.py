"""One process of the approval race: opens its own System and fires decisions at every approval.

Each process approves, rejects or expires (through `expire_run` on the approval's own run)
every approval once, in its own shuffled order with random jitter, and reports what it won
and how each loser was told. It runs in a spawned process, so it imports only what it needs.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from datetime import datetime
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from typing import Any

from actors import (
    ApprovalExpireRunError,
    ApprovalNotPendingError,
    ApprovalResolution,
    ApprovalResolvingError,
    System,
)
from eventlog import ManualClock

PASSIVATE_EVERY = 250  # keeps this process's actor threads few, and exercises refolding


def work(
    n: int, path: str, now: str, plan: list[tuple[str, str]], seed: int, go: Event, out: Queue[Any]
) -> None:
    try:
        out.put(("result", n, _race(n, path, now, plan, seed, go, out)))
    except BaseException as e:
        out.put(("error", n, repr(e)))
        raise


def _race(
    n: int, path: str, now: str, plan: list[tuple[str, str]], seed: int, go: Event, out: Queue[Any]
) -> dict[str, Any]:
    rng = random.Random(seed)
    ops = [(id, run, rng.choice(["approve", "reject", "expire"])) for id, run in plan]
    rng.shuffle(ops)
    actor = f"p{n}"
    decided_here: list[str] = []
    counts: Counter[str] = Counter()
    won: dict[str, str] = {}
    # The same manual time as the parent: on the wall clock every approval would be expired.
    clock = ManualClock(datetime.fromisoformat(now))
    with System.open(path, clock=clock, scheduler=False, synchronous="NORMAL") as system:

        def on_resolved(resolution: ApprovalResolution) -> None:
            decided_here.append(resolution.approval.id)

        system.approvals.on_resolved = on_resolved
        out.put(("ready", n, None))
        if not go.wait(60):
            raise TimeoutError("never told to start")
        for i, (id, run, op) in enumerate(ops):
            if rng.random() < 0.2:
                time.sleep(rng.random() / 1000)  # jitter: shifts this process against the others
            counts["attempts"] += 1
            if op == "expire":
                before = len(decided_here)
                try:
                    system.approvals.expire_run(run, f"abort-{actor}")
                except ApprovalExpireRunError:
                    counts["lost:expire_run_error"] += 1  # it saw the approval open, then lost
                    continue
                if id in decided_here[before:]:
                    won[id] = "expired"
                    counts["won"] += 1
                else:
                    counts["lost:nothing_to_expire"] += 1  # the seed's ExpireRun: nil, no effect
                continue
            try:
                system.approvals.resolve(id, op, actor)
            except ApprovalNotPendingError:
                counts["lost:not_pending"] += 1
            except ApprovalResolvingError:
                counts["lost:resolving"] += 1
            else:
                won[id] = op
                counts["won"] += 1
            if i % PASSIVATE_EVERY == PASSIVATE_EVERY - 1:
                system.passivate()
    return {"won": won, "counts": dict(counts), "hooked": decided_here}
