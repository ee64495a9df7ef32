"""Runs as OpenTelemetry traces: `export --otlp` sends the demo's runs to a collector on loopback,
one trace per run with its spans; a second export gives the same ids; the live feed resumes
from its cursor after a restart."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

import pytest

from eventlog import open_log
from eventlog.events import RunFinished, RunRegistered, RunReported
from projections.traces import digest
from tools.feeds import INSTALL, OtelFeed, OtlpSender

from ..tools.helpers import run
from .receivers import Collector

pytest.importorskip("opentelemetry.proto", reason="pip install 'flightlog[otel]'")


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


def attrs(span) -> dict:
    out = {}
    for kv in span.attributes:
        v = kv.value
        out[kv.key] = getattr(v, v.WhichOneof("value"))
    return out


def by_trace(spans) -> dict[bytes, list]:
    traces: dict[bytes, list] = {}
    for s in spans:
        traces.setdefault(s.trace_id, []).append(s)
    return traces


def test_export_sends_one_trace_per_run_with_its_spans(demo_db, collector):
    result = run("export", str(demo_db), "--otlp", collector.url, "--json")
    assert result.exit_code == 0, result.output
    traces = by_trace(collector.spans)
    roots = {attrs(s)["flightlog.run.id"]: s for s in collector.spans if not s.parent_span_id}
    assert len(traces) == len(roots) == 4  # deployer, reviewer, the SDK's tester and the controller's run
    assert {r.name for r in roots.values()} >= {"run deployer", "run reviewer", "run tester"}
    for root in roots.values():  # every span of a trace hangs from its run's root
        assert all(s.parent_span_id == root.span_id for s in traces[root.trace_id] if s is not root)

    deployer, reviewer = roots["deployer"], roots["reviewer"]
    assert deployer.status.code == 1
    assert reviewer.status.code == 2
    assert reviewer.status.message == "denied: Write /etc/motd"
    assert [e.name for e in deployer.events].count("report") == 5  # reports are span events

    names = {s.name for s in traces[deployer.trace_id]}
    assert names == {"run deployer", "approval permission", "ask reviewer"}
    approval = next(s for s in traces[deployer.trace_id] if s.name == "approval permission")
    a = attrs(approval)
    assert (a["flightlog.approval.decision"], a["flightlog.approval.decided_by"]) == ("approve", "alice")
    assert a["flightlog.approval.decided_by_credential"]
    assert a["flightlog.approval.risk"] == "high"
    assert a["flightlog.tool.name"] == "bash"
    assert a["flightlog.approval.latency_ms"] >= 0
    assert approval.end_time_unix_nano >= approval.start_time_unix_nano
    ask = next(s for s in traces[deployer.trace_id] if s.name == "ask reviewer")
    assert attrs(ask)["flightlog.ask.outcome"] == "answered"

    agent = next(r for r in roots.values() if attrs(r)["flightlog.run.kind"] == "agent")
    tool = next(s for s in traces[agent.trace_id] if s.name == "tool reconcile")
    t = attrs(tool)
    assert t["flightlog.tool.outcome"] == "complete"
    assert tool.status.code == 1
    assert t["flightlog.tool.arguments_sha256"] == digest({"replicas": 3, "service": "web"})
    quorum = next(s for s in traces[agent.trace_id] if s.name == "approval reconcile")
    assert attrs(quorum)["flightlog.approval.quorum"] == 2
    assert attrs(collector.resources[0])["service.name"] == "flightlog"


def test_the_same_export_twice_gives_the_same_ids(demo_db, collector):
    assert run("export", str(demo_db), "--otlp", collector.url).exit_code == 0
    first = sorted((s.trace_id, s.span_id, s.parent_span_id, s.name) for s in collector.spans)
    collector.spans.clear()
    assert run("export", str(demo_db), "--otlp", collector.url).exit_code == 0
    second = sorted((s.trace_id, s.span_id, s.parent_span_id, s.name) for s in collector.spans)
    assert first == second
    assert len(first) == 10  # 4 runs, 4 approvals, 1 ask, 1 tool call


def test_export_of_one_run_sends_its_trace_alone(demo_db, collector):
    assert run("export", str(demo_db), "--otlp", collector.url, "--run", "reviewer").exit_code == 0
    assert {attrs(s).get("flightlog.run.id") for s in collector.spans if not s.parent_span_id} == {"reviewer"}
    assert len(by_trace(collector.spans)) == 1


def test_without_the_extra_the_export_says_what_to_install(demo_db, monkeypatch):
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    result = run("export", str(demo_db), "--otlp", "http://127.0.0.1:9")
    assert result.exit_code == 2
    assert "pip install 'flightlog[otel]'" in result.output
    assert INSTALL in result.output


def broker_run(log, run_id: str, at: datetime, status: str = "done") -> None:
    log.append(f"run-{run_id}", [
        RunRegistered(run_id, "ab" * 32, None, at, "local", "tests"),
        RunReported(run_id, "working", '{"note": "step"}', at),
        RunFinished(run_id, status, "finished", (), None, at + timedelta(seconds=1)),
    ])  # fmt: skip


def test_the_live_feed_resumes_from_its_cursor_after_a_restart(tmp_path, collector):
    at = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    with open_log(tmp_path / "live.db") as log:
        broker_run(log, "before", at)  # before the first start: not sent, as history
        feed = OtelFeed(log, OtlpSender(collector.url)).start()
        try:
            broker_run(log, "first", at)
            collector.wait_for(lambda: any(s.name == "run first" for s in collector.spans), "run first")
        finally:
            feed.close()
        broker_run(log, "while-down", at, status="failed")  # appended while no feed runs
        feed = OtelFeed(log, OtlpSender(collector.url)).start()
        try:
            broker_run(log, "second", at)
            collector.wait_for(lambda: any(s.name == "run second" for s in collector.spans), "run second")
        finally:
            feed.close()
    names = [s.name for s in collector.spans]
    # Each run once: none lost while the feed was down, none sent again after the restart.
    assert sorted(names) == ["run first", "run second", "run while-down"]
    assert feed.dropped == 0
