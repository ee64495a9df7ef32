"""`bench soak`'s hostile mix: a few runs attack a server with default quotas while normal runs report.

The attackers, each on its own connection and as fast as the server answers, from a process of
their own (as other clients would be: in this one, their threads would hold up the normal
runs' for the interpreter's lock and count as the server's latency): 1 MiB reports
(and 60 KiB ones past the write rate), /register with ~1 MiB of peer fields, a /send flood
at a run that never polls, and an approval flood. Meanwhile the normal runs report as a
quiet server saw them report, and the operator stops the flooded run again and again. The
figures: the normal runs' report p99 beside a quiet phase's on the same server, the
operator's stop latency, the answers each attack got, and the server's RSS.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson

from .approvals import percentile
from .broker_client import Connection, ServerProcess
from .soak_polls import server_stats

NORMAL_RUNS = 4
ROUNDS = 3  # quiet phases, each followed by one under attack
PACE = 0.01  # seconds a normal run waits between two reports (within its default write rate)
STOP_EVERY = 0.02  # seconds between two of the operator's stops
STOP_TARGET_MS = 100.0  # the operator's stop, p99 under attack, at most
REPORT_RATIO_TARGET = 2.0  # normal runs' report p99 under attack / quiet, at most
ATTACKS = ("big_reports", "peer_fields", "send_flood", "approval_flood")
_BIG = b"x" * 1_000_000  # a payload that fits the 1 MiB body, not the payload quota
_MEDIUM = b"x" * 60_000  # one that fits the quota


def hostile(
    server: ServerProcess, operator_token: str, reports: int, advance: Callable[[str], object]
) -> dict[str, Any]:
    """ROUNDS quiet phases, each followed by one under attack, with the same normal traffic; the figures.

    Alternating, the two kinds of phase see the same moments of a shared machine; each phase
    has runs of its own (within their write rate). The ratio is of the p99s of all quiet and
    all attacked reports; each round's is given too.
    """
    setup = Connection(server.port)
    try:

        def register(run_id: str) -> str:
            return str(setup.call("/register", {"run_id": run_id})["token"])

        phases = [
            [(f"{kind}-{r}-{i}", register(f"{kind}-{r}-{i}")) for i in range(NORMAL_RUNS)]
            for r in range(ROUNDS)
            for kind in ("quiet", "normal")
        ]
        tokens = {name: register(name) for name in ("victim", "big", "sender", "gate")}
    finally:
        setup.close()
    rss_start, threads_start = server_stats(server.proc.pid)
    stop = threading.Event()
    stops: list[float] = []
    refused_stops: Counter[int] = Counter()
    context = multiprocessing.get_context("spawn")
    ready, attacking, finished, answered = context.Event(), context.Event(), context.Event(), context.Queue()
    attackers = context.Process(
        target=_attackers, args=(server.port, tokens, (ready, attacking, finished), answered), daemon=True
    )
    operator = threading.Thread(
        target=_operator, args=(server.port, operator_token, stops, refused_stops, stop), daemon=True
    )
    attackers.start()
    while not ready.wait(0.1):  # until every attacker has its connection
        if not attackers.is_alive():
            raise RuntimeError(f"the attackers' process exited ({attackers.exitcode}) before attacking")
    quiet: list[list[float]] = []
    loud: list[list[float]] = []
    try:
        for r in range(ROUNDS):
            advance(f"hostile mix: quiet phase {r + 1}/{ROUNDS}")
            quiet.append(_normal(server.port, phases[2 * r], reports))
            advance(f"hostile mix: attacks with normal traffic {r + 1}/{ROUNDS}")
            attacking.set()
            if r == 0:
                operator.start()  # the operator stops the flooded run again and again from now on
            loud.append(_normal(server.port, phases[2 * r + 1], reports))
            attacking.clear()
    finally:
        stop.set()
        attacking.clear()
        finished.set()
        if operator.is_alive():
            operator.join(60)
        answers: dict[str, dict[str, int]] = answered.get(timeout=60) if attackers.is_alive() else {}
        attackers.join(60)
    rss_end, threads_end = server_stats(server.proc.pid)
    quiet_p99 = percentile([x for phase in quiet for x in phase], 99)
    loud_p99 = percentile([x for phase in loud for x in phase], 99)
    return {
        "report_p99_quiet_ms": round(quiet_p99 * 1000, 2),
        "report_p99_hostile_ms": round(loud_p99 * 1000, 2),
        "report_p99_ratio": round(loud_p99 / quiet_p99, 2) if quiet_p99 else 0.0,
        "report_p99_ratio_by_round": [
            round(percentile(b, 99) / percentile(a, 99), 2) for a, b in zip(quiet, loud, strict=True)
        ],
        "stop_p50_ms": round(percentile(stops, 50) * 1000, 2) if stops else 0.0,
        "stop_p99_ms": round(percentile(stops, 99) * 1000, 2) if stops else 0.0,
        "stops": len(stops),
        "stops_refused": sum(refused_stops.values()),
        "answers": answers,
        "rss_start_mib": round(rss_start, 2),
        "rss_end_mib": round(rss_end, 2),
        "threads_start": threads_start,
        "threads_end": threads_end,
    }


def _normal(port: int, runs: list[tuple[str, str]], reports: int) -> list[float]:
    """Each run reports `reports` times on its own connection; every report's latency (s)."""
    latencies: list[float] = []
    lock = threading.Lock()

    def one(run_id: str, token: str) -> None:
        conn = Connection(port)
        mine = []
        try:
            for n in range(reports):
                time.sleep(PACE)  # an agent between two tool calls, not a flood
                body = orjson.dumps(
                    {"run_id": run_id, "token": token, "state": "working", "payload": {"n": n}}
                )
                started = time.perf_counter()
                status, answer = conn.post("/report", body)
                mine.append(time.perf_counter() - started)
                if status != 200:
                    raise RuntimeError(f"a normal run's report answered {status}: {answer[:200]!r}")
        finally:
            conn.close()
            with lock:
                latencies.extend(mine)

    threads = [threading.Thread(target=one, args=run, daemon=True) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return latencies


def _attackers(port: int, tokens: dict[str, str], events: tuple[Any, Any, Any], answered: Any) -> None:
    """Every attack on its own thread and connection (this process's own), sending while
    `attacking` is set, until `finished`; the answers each got, by status, put on `answered`."""
    ready = events[0]
    answers: dict[str, Counter[int]] = {name: Counter() for name in ATTACKS}
    connections = {name: Connection(port) for name in ATTACKS}
    threads = [
        threading.Thread(target=_attack, args=(connections[name], name, tokens, answers[name], events))
        for name in ATTACKS
    ]
    for thread in threads:
        thread.start()
    ready.set()
    for thread in threads:
        thread.join()
    for conn in connections.values():
        conn.close()
    answered.put({name: {str(k): v for k, v in sorted(c.items())} for name, c in answers.items()})


def _attack(
    conn: Connection, name: str, tokens: dict[str, str], answers: Counter[int], events: tuple[Any, Any, Any]
) -> None:
    _, attacking, finished = events
    n = 0
    while not finished.is_set():
        if not attacking.wait(0.05):
            continue
        n += 1
        status, _ = conn.post(*_request(name, n, tokens))
        answers[status] += 1


def _request(name: str, n: int, tokens: dict[str, str]) -> tuple[str, bytes]:
    if name == "big_reports":
        creds = b'{"run_id":"big","token":"%s","state":"x","payload":"' % tokens["big"].encode()
        return "/report", creds + (_BIG if n % 2 else _MEDIUM) + b'"}'
    if name == "peer_fields":
        field = b"y" * 200_000
        body = b'{"run_id":"peer-%d"' % n + b"".join(
            b',"%s":"%s"' % (key, field) for key in (b"label", b"backend", b"model", b"dir", b"status")
        )
        return "/register", body + b"}"
    if name == "send_flood":
        sender = {"run_id": "sender", "token": tokens["sender"], "from_run_id": "sender"}
        value = {**sender, "to_run_id": "victim", "type": "note", "payload": {"n": n}}
        return "/send", orjson.dumps(value)
    value = {"run_id": "gate", "token": tokens["gate"], "request_id": f"g{n}", "tool_name": "bash",
             "description": f"rm -rf /srv/{n}"}  # fmt: skip
    return "/permission_request", orjson.dumps(value)


def _operator(
    port: int, operator_token: str, stops: list[float], refused: Counter[int], stop: threading.Event
) -> None:
    conn = Connection(port, {"Authorization": f"Bearer {operator_token}"})
    body = orjson.dumps({"type": "stop"})
    try:
        while not stop.wait(STOP_EVERY):
            started = time.perf_counter()
            status, _ = conn.post("/api/v1/runs/victim/control", body)
            stops.append(time.perf_counter() - started)
            if status != 200:
                refused[status] += 1
    finally:
        conn.close()


def hostile_targets(fig: dict[str, Any], rss_target: float) -> dict[str, dict[str, Any]]:
    """The hostile mix's targets: the operator's stop, the normal runs' reports, RSS."""
    ratio, stop_p99 = fig["report_p99_ratio"], fig["stop_p99_ms"]
    return {
        "hostile_stop": {
            "label": "operator's stop under attack, p99 (ms); every stop queued",
            "value": stop_p99,
            "target": STOP_TARGET_MS,
            "at_most": True,
            "pass": stop_p99 <= STOP_TARGET_MS and fig["stops_refused"] == 0 and fig["stops"] > 0,
        },
        "hostile_reports": {
            "label": "normal runs' report p99 under attack / quiet",
            "value": ratio,
            "target": REPORT_RATIO_TARGET,
            "at_most": True,
            "pass": ratio <= REPORT_RATIO_TARGET,
        },
        "hostile_rss": {
            "label": "RSS after the hostile mix (MiB)",
            "value": fig["rss_end_mib"],
            "target": rss_target,
            "at_most": True,
            "pass": fig["rss_end_mib"] <= rss_target,
        },
    }
