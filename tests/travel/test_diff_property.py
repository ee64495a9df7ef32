"""Diffs are right: for any two moments a < b, applying the diff to the view at a gives the view at b.

Harness events with empty or repeated ids (as real harnesses send them) used to collapse onto
one diff key; entries are now keyed by the seq of the event that created them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog import ANY, ManualClock, open_log
from eventlog.events import (
    AgentRunStarted,
    HarnessEventRecorded,
    PermissionDecided,
    PermissionRequested,
    RunFinished,
    RunRegistered,
    RunReported,
)
from projections import Views, apply_diff

T0 = datetime(2026, 1, 1, tzinfo=UTC)

# One harness event: its type, and a small id space so that ids repeat and are often empty.
ids = st.sampled_from(["", "", "a", "b"])
harness_events = st.one_of(
    st.tuples(st.just("user.message"), ids, st.text(max_size=3)),
    st.tuples(st.just("assistant.message"), ids, st.text(max_size=3)),
    st.tuples(st.just("assistant.delta"), ids, st.text(max_size=3)),
    st.tuples(st.just("tool.start"), ids, st.text(max_size=3)),
    st.tuples(st.just("tool.complete"), ids, st.text(max_size=3)),
    st.tuples(st.just("warning"), ids, st.text(max_size=3)),
)
broker_events = st.sampled_from(["report", "permission", "decision", "finish"])


def _harness(kind: str, ident: str, text: str) -> dict[str, Any]:
    if kind in ("assistant.message", "assistant.delta"):
        return {"message_id": ident, "content": text, "delta": text}
    if kind in ("tool.start", "tool.complete"):
        return {"tool_call_id": ident, "tool_name": "sh", "arguments": {"t": text}, "output": text}
    return {"content": text, "message": text}


def build(steps: list[tuple[int, Any]]) -> tuple[Views, int]:
    """A log with one controller run and one broker run whose events interleave as `steps` say."""
    clock = ManualClock(T0)
    log = open_log(":memory:", clock=clock)
    at = T0
    log.append("controller-c", [AgentRunStarted("r1", "c", "s", "t", "p", at)], expect=ANY)
    log.append("run-b", [RunRegistered("b", "0" * 64, at, at)], expect=ANY)
    for n, (tick, step) in enumerate(steps):
        at += timedelta(seconds=tick)  # 0 often: entries at the same time keep their order
        clock.set(at)
        if isinstance(step, tuple):
            kind, ident, text = step
            event = HarnessEventRecorded("r1", kind, ident, _harness(kind, ident, text), at)
            log.append("controller-c", [event], expect=ANY)
        elif step == "report":
            log.append("run-b", [RunReported("b", "working", '{"note": "x"}', at)], expect=ANY)
        elif step == "permission":
            req = PermissionRequested("b", f"q{n}", "sh", "run", "ls", f"ap{n}", at)
            log.append("run-b", [req], expect=ANY)
        elif step == "decision":
            decided = PermissionDecided("b", f"q{n - 1}", "allow", f"ap{n - 1}", "alice", at)
            log.append("run-b", [decided], expect=ANY)
        else:
            log.append("run-b", [RunFinished("b", "done", "ok", (), None, at)], expect=ANY)
    return Views(log, snapshots=None), log.head().seq


def ordered(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(items, key=lambda e: (e["at"], e["seq"]))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([0, 0, 1]), st.one_of(harness_events, broker_events)), max_size=25),
    st.data(),
)
def test_applying_the_diff_at_a_gives_the_view_at_b(steps, data):
    views, head = build(steps)
    a = data.draw(st.integers(0, head), label="a")
    b = data.draw(st.integers(a, head), label="b")
    for run_id in ("r1", "b"):
        before = [e.to_dict() for e in views.timeline(run_id, at=a)]
        after = [e.to_dict() for e in views.timeline(run_id, at=b)]
        assert len({e["seq"] for e in after}) == len(after)  # the keys are unique
        diff = views.diff("timeline", run_id, a=a, b=b)
        assert ordered(apply_diff(before, diff, "seq")) == after
        # Every added entry was created after a: "changed since" never lists older entries.
        assert all(a < e["seq"] <= b for e in diff.added)
    runs_diff = views.diff("runs", a=a, b=b)
    runs_before = [r.to_dict() for r in views.runs(at=a)]
    assert apply_diff(runs_before, runs_diff, "run_id") == [r.to_dict() for r in views.runs(at=b)]


def test_messages_with_no_ids_are_separate_entries_in_a_diff():
    steps = [(1, ("user.message", "", "do it")), (1, ("assistant.message", "", "done"))]
    views, head = build(steps)
    diff = views.diff("timeline", "r1", a=head - 1, b=head)
    # Before: the reply was reported as the prompt "changed" into it (both had id "").
    assert not diff.changed
    assert not diff.removed
    assert [(e["role"], e["text"]) for e in diff.added] == [("assistant", "done")]
