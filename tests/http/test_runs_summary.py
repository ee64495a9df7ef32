"""GET /api/v1/runs from the live views says what folding every run's stream says, byte for byte."""

from __future__ import annotations

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors import ActorsError, ControlMessage, Reply, System
from eventlog import ManualClock, open_log
from projections import Views
from tools.http.operator import live_summaries, run_summary

RUNS = ["a", "b", "c"]
REQUESTS = ["p1", "p2"]  # few, so that request ids repeat

step = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(RUNS)),
    st.tuples(st.just("reregister"), st.sampled_from(RUNS)),
    st.tuples(st.just("delete"), st.sampled_from(RUNS)),
    st.tuples(st.just("push"), st.sampled_from(RUNS)),
    st.tuples(st.just("take"), st.sampled_from(RUNS)),
    st.tuples(st.just("report"), st.sampled_from(RUNS)),
    st.tuples(st.just("finish"), st.sampled_from(RUNS), st.sampled_from(["done", "failed", "blocked"])),
    st.tuples(st.just("reply"), st.sampled_from(RUNS)),
    st.tuples(st.just("heartbeat"), st.sampled_from(RUNS)),
    st.tuples(st.just("ask"), st.sampled_from(RUNS), st.sampled_from(REQUESTS)),
    st.tuples(st.just("answer"), st.sampled_from(RUNS), st.sampled_from(REQUESTS)),
)


def play(system: System, clock: ManualClock, steps: list[tuple]) -> None:
    broker = system.broker
    tokens: dict[str, str] = {}
    for n, (kind, run_id, *rest) in enumerate(steps):
        clock.advance(0.25)
        try:
            if kind == "register":
                tokens[run_id] = broker.register(run_id, tokens.get(run_id, ""))
            elif kind == "reregister" and run_id in tokens:
                broker.register(run_id, tokens[run_id])
            elif kind == "delete":
                broker.delete_run(run_id)
            elif kind == "push":
                broker.push_control(run_id, ControlMessage(f"m{n % 3}", "steer", run_id))
            elif kind == "take":
                broker.take_control(run_id)
            elif kind == "report":
                broker.ingest(run_id, "working", orjson.dumps({"n": n}))
            elif kind == "finish":
                broker.ingest(run_id, rest[0], orjson.dumps({"n": n}))
            elif kind == "reply":
                broker.reply(Reply(run_id, "b", orjson.dumps({"n": n}).decode()))
            elif kind == "heartbeat":
                broker.heartbeat(run_id)
            elif kind == "ask":
                broker.permission_request(run_id, rest[0], "bash", "ls", "")
            elif kind == "answer":
                broker.permission_decision(run_id, rest[0], "allow")
        except ActorsError:
            continue  # a refusal the broker documents (no such run, registered already): nothing recorded


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=40))
def test_the_live_summary_equals_the_folded_one(tmp_path_factory, steps):
    clock = ManualClock()
    path = tmp_path_factory.mktemp("runs") / "flightlog.db"
    with System.open(path, clock=clock, scheduler=False) as system:
        play(system, clock, steps)
        folded = [run_summary(v) for v in (system.broker.get_run(r) for r in system.broker.run_ids()) if v]
        assert orjson.dumps(live_summaries(system.views)) == orjson.dumps(folded)
        live = system.views.digests()
    log = open_log(path)
    try:
        assert Views(log, snapshots=None).digests() == live  # and the views rebuild the same
    finally:
        log.close()
