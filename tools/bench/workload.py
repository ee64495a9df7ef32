"""A seeded, mixed workload: broker runs, approvals and controller conversations, interleaved.

The same seed gives the same events in the same order with the same times (a ManualClock
moves a fixed step per burst), so two logs filled from one seed hold the same history, apart
from event ids. Every run contributes exactly `EVENTS_PER_RUN` events.
"""

from __future__ import annotations

import hashlib
import queue
import random
import threading
import zlib
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from eventlog import Event, EventLog, ManualClock
from eventlog.events import (
    AgentRunStarted,
    AgentRunStatusChanged,
    ApprovalDecided,
    ApprovalDecisionRefused,
    ApprovalPublished,
    ApprovalRequested,
    ControlDelivered,
    ControllerClosed,
    ControllerStarted,
    ControlQueued,
    HarnessEventRecorded,
    PermissionDecided,
    PermissionRequested,
    PromptDelivered,
    RunFinished,
    RunHeartbeat,
    RunRegistered,
    RunReplied,
    RunReported,
)

EVENTS_PER_RUN = 100
RUNS_PER_SESSION = 2  # each controller session holds two runs, one after the other
ACTIVE = 64  # sessions in progress at once: their bursts interleave in the log
TOOLS = ("shell", "read_file", "write_file", "search", "http_get")
_PROSE = (
    "the build passes now, tests were flaky because of a shared temp dir; I will pin the seed "
    "and rerun the suite before opening the pull request with the migration notes"
)
WORDS = tuple(_PROSE.split(" "))

Burst = tuple[str, list[Event]]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _hid(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:32]


class _Session:
    """One controller session: its runs' bursts, produced lazily in order."""

    def __init__(self, index: int, run_ids: list[str], seed: int, clock: ManualClock) -> None:
        self.rng = random.Random(f"{seed}/{index}")
        self.cid = _hid("controller", seed, index)
        self.sid = _hid("session", seed, index)
        self.run_ids = run_ids
        self.clock = clock
        self.steps = self._script()

    def now(self) -> datetime:
        return self.clock.now()

    def _script(self) -> Iterator[Burst]:
        ctl = f"controller-{self.cid}"
        yield ctl, [ControllerStarted(self.cid, self.sid, self.now())]
        for i, run_id in enumerate(self.run_ids):
            first, last = i == 0, i == len(self.run_ids) - 1
            yield from self._run(ctl, run_id, budget=EVENTS_PER_RUN - first - last)
        yield ctl, [ControllerClosed(self.cid, self.now())]

    def _run(self, ctl: str, run_id: str, budget: int) -> Iterator[Burst]:
        rng, now = self.rng, self.now
        run = f"run-{run_id}"
        count = 0

        def burst(stream: str, events: list[Event]) -> Burst:
            nonlocal count
            count += len(events)
            return stream, events

        yield burst(run, [RunRegistered(run_id, _hid("token", run_id), now(), now())])
        prompt = _text(rng, 12)
        yield burst(
            ctl,
            [
                AgentRunStarted(run_id, self.cid, self.sid, prompt[:40], prompt, now()),
                PromptDelivered(run_id, prompt, "immediate", False, now()),
                AgentRunStatusChanged(run_id, "running", "", now()),
                HarnessEventRecorded(run_id, "user.message", _hid(run_id, "u"), {"content": prompt}, now()),
            ],
        )
        approval_turn = rng.randrange(3)
        for turn in range(3):
            message_id = _hid(run_id, "m", turn)
            words = [_text(rng, 3) for _ in range(rng.randint(5, 9))]
            for lo in range(0, len(words), 3):
                deltas: list[Event] = [
                    HarnessEventRecorded(
                        run_id,
                        "assistant.delta",
                        _hid(run_id, "d", turn, lo + k),
                        {"message_id": message_id, "delta": w + " "},
                        now(),
                    )
                    for k, w in enumerate(words[lo : lo + 3])
                ]
                yield burst(ctl, deltas)
            content = " ".join(words)
            yield burst(
                ctl,
                [
                    HarnessEventRecorded(
                        run_id,
                        "assistant.message",
                        _hid(run_id, "a", turn),
                        {"message_id": message_id, "content": content},
                        now(),
                    )
                ],
            )
            yield burst(run, [RunHeartbeat(run_id, now()), RunReported(run_id, "working", None, now())])
            for t in range(4):
                call = f"call_{_hid(run_id, turn, t)[:12]}"
                tool = rng.choice(TOOLS)
                args = {"path": f"/work/{_text(rng, 1)}.py", "limit": rng.randint(1, 400)}
                yield burst(
                    ctl,
                    [
                        HarnessEventRecorded(
                            run_id,
                            "tool.start",
                            _hid(call, "s"),
                            {"tool_call_id": call, "tool_name": tool, "arguments": args},
                            now(),
                        )
                    ],
                )
                if turn == approval_turn and t == 0:
                    yield from (burst(*b) for b in self._approval(run_id, call, tool))
                result: dict[str, object] = {"tool_call_id": call, "result": _text(rng, 6)}
                if rng.random() < 0.1:
                    result["error"] = "exit status 1"
                yield burst(
                    ctl, [HarnessEventRecorded(run_id, "tool.complete", _hid(call, "c"), result, now())]
                )
            if turn == 1:
                mid = _hid(run_id, "ctl")
                yield burst(run, [ControlQueued(run_id, mid, "steer", "", '{"text":"go on"}', now())])
                yield burst(run, [ControlDelivered(run_id, (mid,), now())])
        yield burst(
            ctl,
            [
                HarnessEventRecorded(run_id, "session.idle", _hid(run_id, "idle"), {}, now()),
                AgentRunStatusChanged(run_id, "succeeded", "", now()),
            ],
        )
        # Pad with heartbeats and reports so every run holds exactly EVENTS_PER_RUN events.
        tail: list[Event] = [
            RunReplied(run_id, "operator", '{"ok":true}', now()),
            RunFinished(run_id, "done", _text(rng, 5), ("src/app.py",), None, now()),
        ]
        while count + len(tail) < budget:
            n = min(rng.randint(1, 3), budget - count - len(tail))
            kind = rng.random()
            evs: list[Event] = [
                RunHeartbeat(run_id, now()) if kind < 0.6 else RunReported(run_id, "working", None, now())
                for _ in range(n)
            ]
            yield burst(run, evs)
        yield burst(run, tail)

    def _approval(self, run_id: str, call: str, tool: str) -> Iterator[Burst]:
        rng, now = self.rng, self.now
        aid = _hid("approval", run_id, call)
        request_id = _hid("perm", run_id, call)[:16]
        run, appr = f"run-{run_id}", f"approval-{aid}"
        yield run, [PermissionRequested(run_id, request_id, tool, "run a tool", "ls -la", aid, now())]
        requested = now()
        yield (
            appr,
            [
                ApprovalRequested(
                    aid, run_id, call, "tool", f"Allow {tool}?", "ls -la /work", "medium",
                    _hid("payload", aid) * 2, False, 1, requested, requested + timedelta(minutes=5), "agent",
                ),
                ApprovalPublished(aid, now()),
            ],
        )  # fmt: skip
        roll = rng.random()
        decision = "approve" if roll < 0.8 else "reject" if roll < 0.95 else "expired"
        actor = "system" if decision == "expired" else rng.choice(("alice", "bob", "carol"))
        yield appr, [ApprovalDecided(aid, decision, actor, f"{actor}@example.com", now())]
        if rng.random() < 0.2:
            why = "already decided"
            yield appr, [ApprovalDecisionRefused(aid, "reject", "dave", "dave@example.com", why, now())]
        behavior = "allow" if decision == "approve" else "deny"
        yield run, [PermissionDecided(run_id, request_id, behavior, aid, actor, now())]


def bursts(runs: int, seed: int = 0, clock: ManualClock | None = None) -> Iterator[Burst]:
    """The workload's bursts `(stream, events)` in log order: `runs` runs over interleaved sessions."""
    clock = clock or ManualClock()
    rng = random.Random(seed)
    sessions = (runs + RUNS_PER_SESSION - 1) // RUNS_PER_SESSION
    made = 0

    def session(i: int) -> _Session:
        nonlocal made
        lo = i * RUNS_PER_SESSION
        ids = [_hid("run", seed, n) for n in range(lo, min(lo + RUNS_PER_SESSION, runs))]
        made += 1
        return _Session(i, ids, seed, clock)

    active = [session(i) for i in range(min(ACTIVE, sessions))]
    while active:
        k = rng.randrange(len(active))
        step = next(active[k].steps, None)
        if step is None:
            active[k] = active[-1]
            active.pop()
            if made < sessions:
                active.append(session(made))
            continue
        clock.advance(milliseconds=rng.randint(1, 250))
        yield step
    # every burst was yielded; a caller counting events sees runs * EVENTS_PER_RUN


def fill(
    log: EventLog,
    runs: int,
    seed: int = 0,
    *,
    clock: ManualClock | None = None,
    progress: Callable[[int], object] | None = None,
) -> int:
    """Append the workload to `log`; returns the number of events appended."""
    total = 0
    for stream, events in bursts(runs, seed, clock):
        log.append(stream, events)
        total += len(events)
        if progress is not None:
            progress(len(events))
    return total


def fill_parallel(
    log: EventLog,
    runs: int,
    seed: int = 0,
    *,
    threads: int = 8,
    progress: Callable[[int], object] | None = None,
) -> int:
    """Append the workload from `threads` threads, so that the log's group commit batches appends.

    Each stream belongs to one thread, so every stream keeps its order; how streams
    interleave in the log varies from run to run. For large logs; `fill` is deterministic.
    """
    queues: list[queue.Queue[Burst | None]] = [queue.Queue(maxsize=256) for _ in range(threads)]
    errors: list[BaseException] = []

    def work(q: queue.Queue[Burst | None]) -> None:
        while (item := q.get()) is not None:
            if errors:
                continue
            try:
                log.append(*item)
            except BaseException as e:  # noqa: BLE001 - re-raised by the caller below
                errors.append(e)
            if progress is not None:
                progress(len(item[1]))

    workers = [threading.Thread(target=work, args=(q,), daemon=True) for q in queues]
    for w in workers:
        w.start()
    total = 0
    try:
        for stream, events in bursts(runs, seed):
            queues[zlib.crc32(stream.encode()) % threads].put((stream, events))
            total += len(events)
            if errors:
                break
    finally:
        for q in queues:
            q.put(None)
        for w in workers:
            w.join()
    if errors:
        raise errors[0]
    return total
