"""What the console's pages read: the runs list (search, filters, sort, pages), a run's header,
its raw events, one event, and who voted on an approval.

The runs list is built from the views' states in one pass per view and kept until the log's
head moves, so a page of 10,000 runs is a filter and a sort over plain rows, not a fold.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from actors import System, fork_origin
from eventlog import Record, from_micros
from projections import AgentRun, FinishStatus, RunRow

KINDS = ("broker", "agent")
SORTS = ("last_activity", "started", "title", "status", "kind")
MAX_LIMIT = 200
PAYLOAD_HITS = 500  # the newest records whose payload matches a search, at most


class QueryError(ValueError):
    """Raised when a runs-list query names an unknown filter value or a bad time or number."""


@dataclass(frozen=True, slots=True)
class RunsQuery:
    """A runs-list query: text, filters, sort and the page."""

    q: str = ""
    status: str = ""
    kind: str = ""
    actor: str = ""
    since: datetime | None = None
    until: datetime | None = None
    sort: str = "last_activity"
    descending: bool = True
    offset: int = 0
    limit: int = 50


def parse_query(params: Any) -> RunsQuery:
    """The query a request's parameters describe; QueryError names the bad one."""

    def number(name: str, default: int, top: int) -> int:
        text = params.get(name) or ""
        if not text:
            return default
        # ASCII digits only ("²".isdigit() holds), and no more than a bound can use: int() of
        # thousands of digits is refused by Python itself.
        if not (text.isascii() and text.isdigit()) or len(text) > 18:
            raise QueryError(f"{name} must be a whole number from 0 to {top}")
        return min(int(text), top)

    def moment(name: str) -> datetime | None:
        text = params.get(name) or ""
        if not text:
            return None
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise QueryError(f"{name} must be an ISO time such as 2026-01-01T10:42:07Z") from None
        if when.tzinfo is None:
            raise QueryError(f"{name} needs an offset (Z for UTC)")
        return when

    kind = params.get("kind") or ""
    if kind and kind not in KINDS:
        raise QueryError(f"kind must be one of: {', '.join(KINDS)}")
    sort = params.get("sort") or "last_activity"
    if sort not in SORTS:
        raise QueryError(f"sort must be one of: {', '.join(SORTS)}")
    order = params.get("order") or "desc"
    if order not in ("asc", "desc"):
        raise QueryError("order must be asc or desc")
    return RunsQuery(
        q=(params.get("q") or "").strip().lower(),
        status=params.get("status") or "",
        kind=kind,
        actor=(params.get("actor") or "").strip().lower(),
        since=moment("since"),
        until=moment("until"),
        sort=sort,
        descending=order == "desc",
        offset=number("offset", 0, 10**9),
        limit=max(1, number("limit", 50, MAX_LIMIT)),
    )


class RunIndex:
    """Every run (broker and agent) as a list row, rebuilt only when the log's head moved."""

    def __init__(self, system: System) -> None:
        self.system = system
        self._lock = threading.Lock()
        self._head = -1
        self._rows: list[dict[str, Any]] = []
        self._times: dict[int, datetime] = {}  # seq -> when it was recorded (never changes)
        self._orders: dict[tuple[int, str, bool], tuple[list[dict[str, Any]], list[str]]] = {}

    def rows(self) -> list[dict[str, Any]]:
        with self._lock:
            views = self.system.views
            head = views.catch_up()
            if head != self._head:
                self._rows = self._build(views)
                self._head = head
            return self._rows

    def _build(self, views: Any) -> list[dict[str, Any]]:
        runner = views.runner
        broker: list[RunRow] = runner.read("run_registry", lambda s: list(s.values()))
        finishes: dict[str, FinishStatus] = runner.read("finish_status", dict)
        agents: list[AgentRun] = runner.read("agent_runs", lambda s: list(s.values()))
        actors: dict[str, tuple[str, ...]] = runner.read("approval_actors", lambda s: dict(s.actors))
        titles = {r.run_id: r.title for r in agents}
        rows = []
        for r in broker:
            f = finishes.get(r.run_id)
            status = f.last_status if f and f.count else (r.last_state or "registered")
            rows.append(
                _row(r.run_id, "broker", r.run_id, status, r.registered_at, r.last_seen,
                     f.summary if f else "", list(actors.get(r.run_id, ())), r.first_seq)
            )  # fmt: skip
        for a in agents:
            origin = titles.get(a.forked_from, "") if a.forked_from else ""
            fork = f"fork of {origin or a.forked_from[:8]} @{a.fork_seq}" if a.forked_from else ""
            title = a.title or fork
            names = sorted({*actors.get(a.run_id, ()), a.controller_id} - {""})
            last = self._when(a.updated_seq) or a.started_at
            row = _row(a.run_id, "agent", title or a.run_id, a.status or "starting", a.started_at, last,
                       a.reason, names, a.first_seq)  # fmt: skip
            row["forked_from"], row["fork_seq"] = a.forked_from, a.fork_seq
            rows.append(row)
        return rows

    def _when(self, seq: int) -> datetime | None:
        if seq <= 0:
            return None
        found = self._times.get(seq)
        if found is None:
            found = self.system.views.moment(seq)
            if found is not None:
                self._times[seq] = found
        return found

    def _sorted(self, key: str, descending: bool) -> tuple[list[dict[str, Any]], list[str]]:
        """The rows in the order asked for, and every status, sorted once per head and order."""
        with self._lock:
            rows, head = self._rows, self._head
            cached = self._orders.get((head, key, descending))
            if cached is not None:
                return cached
        field = "started_at" if key == "started" else key

        def order(r: dict[str, Any]) -> Any:
            value = r[field]
            if isinstance(value, datetime) or value is None:
                return (value is not None, value.timestamp() if value else 0.0, r["first_seq"])
            return (True, str(value).lower(), r["first_seq"])

        result = (sorted(rows, key=order, reverse=descending), sorted({r["status"] for r in rows}))
        with self._lock:
            if self._head == head:
                self._orders = {k: v for k, v in self._orders.items() if k[0] == head}
                self._orders[(head, key, descending)] = result
        return result

    def query(self, query: RunsQuery) -> dict[str, Any]:
        self.rows()
        ordered, statuses = self._sorted(query.sort, query.descending)
        found = self._payload_runs(query.q) if query.q else frozenset()
        hits = [
            r
            for r in ordered
            if _matches(r, query) or (r["run_id"] in found and _matches(r, query, text=False))
        ]
        page = hits[query.offset : query.offset + query.limit]
        return {"total": len(hits), "offset": query.offset, "limit": query.limit, "runs": page,
                "statuses": statuses}  # fmt: skip

    def _payload_runs(self, text: str) -> frozenset[str]:
        """The runs whose events' payloads hold `text`: the log searches the payload text (newest
        records first, up to PAYLOAD_HITS of them); no payload is kept here."""
        log = self.system.log
        runs = set()
        for seq in log.seqs_containing(text, PAYLOAD_HITS):
            for r in log.read_all(after_seq=seq - 1, to_seq=seq):
                runs.add(event_run_id(self.system, r))
        return frozenset(runs - {""})


def _row(
    run_id: str, kind: str, title: str, status: str, started: datetime | None, last: datetime | None,
    text: str, actors: list[str], first_seq: int,
) -> dict[str, Any]:  # fmt: skip
    return {
        "run_id": run_id,
        "kind": kind,
        "title": title,
        "status": status,
        "started_at": started,
        "last_activity": last,
        "summary": text,
        "actors": actors,
        "first_seq": first_seq,
        "forked_from": "",
        "fork_seq": 0,
    }


def _matches(r: dict[str, Any], q: RunsQuery, *, text: bool = True) -> bool:
    if q.kind and r["kind"] != q.kind:
        return False
    if q.status and r["status"] != q.status:
        return False
    if q.actor and not any(q.actor in a.lower() for a in r["actors"]):
        return False
    last = r["last_activity"] or r["started_at"]
    if q.since is not None and (last is None or last < q.since):
        return False
    if q.until is not None and (r["started_at"] is None or r["started_at"] > q.until):
        return False
    if q.q and text:
        hay = f"{r['run_id']}\n{r['title']}\n{r['summary']}".lower()
        if q.q not in hay:
            return False
    return True


# -- a run's records -----------------------------------------------------------------------------


def event_json(r: Record) -> dict[str, Any]:
    """One record as the event history shows it: where, what, when, who, its hash and payload."""
    meta = r.meta or {}
    actor = meta.get("actor") or r.data.get("actor") or r.data.get("from_run_id") or ""
    return {
        "seq": r.seq,
        "stream": r.stream,
        "version": r.version,
        "type": r.type,
        "at": from_micros(r.recorded_us),
        "actor": str(actor),
        "hash": r.hash,
        "prev_hash": r.prev_hash,
        "event_id": r.event_id,
        "data": r.data,
        "meta": meta,
    }


def event_run_id(system: System, r: Record) -> str:
    """The run an event belongs to ("" if none): its data's run id, or the run its stream is."""
    run_id = r.data.get("run_id")
    if isinstance(run_id, str) and run_id:
        return run_id
    if r.stream.startswith("run-"):
        return r.stream[len("run-") :]
    if r.stream.startswith("approval-"):
        row = system.views.approval(r.stream[len("approval-") :])
        return row.run_id if row else ""
    return ""


def run_header(system: System, run_id: str, records: list[Record], actors: Iterable[str]) -> dict[str, Any]:
    """A run page's header: kind, status, started, last activity, actors, and its provenance.

    `records` are those of the run's the page names (its first and its record at the moment
    shown): their actors count, and the last is its last activity; `actors` are those of its
    approvals then.
    """
    views = system.views
    agent = views.agent_run(run_id)
    names = {e["actor"] for e in map(event_json, records) if e["actor"]}
    names.update(actors)

    def made_from(state: dict[str, AgentRun]) -> list[AgentRun]:
        return sorted((r for r in state.values() if r.forked_from == run_id), key=lambda r: r.first_seq)

    # Forks are listed as of now even at a past moment: they are the way to the runs made from it.
    forks = [
        {"run_id": r.run_id, "fork_seq": r.fork_seq, "title": r.title}
        for r in views.runner.read("agent_runs", made_from)
    ]
    first = from_micros(records[0].recorded_us) if records else None
    last = from_micros(records[-1].recorded_us) if records else None
    header: dict[str, Any] = {
        "kind": "agent" if agent else "broker",
        "title": (agent.title if agent else run_id) or run_id,
        "started_at": agent.started_at if agent and agent.started_at else first,
        "last_activity": last,
        "actors": sorted(names),
        "forks": forks,
        "forked_from": None,
    }
    if agent is not None:
        header["controller"] = agent.controller_id
        header["session"] = agent.session_id
        if agent.forked_from:
            origin = views.agent_run(agent.forked_from)
            header["forked_from"] = {
                "run_id": agent.forked_from,
                "fork_seq": agent.fork_seq,
                "title": origin.title if origin else "",
                **_changed_decision(system, run_id),
            }
            if not agent.title and origin is not None:
                header["title"] = f"fork of {origin.title or origin.run_id} @{agent.fork_seq}"
    return header


def _changed_decision(system: System, fork_run_id: str) -> dict[str, Any]:
    """The decision a fork at an approval changed ({} for a fork at a seq), from its ForkedFrom."""
    opening = fork_origin(system.log, fork_run_id, system.views)
    if not opening.approval_id:
        return {}
    row = system.views.approval(opening.approval_id)
    return {
        "approval_id": opening.approval_id,
        "decision": opening.decision,
        "recorded": row.status if row is not None else "",
        "decided_by": opening.decided_by,
    }


def voters(system: System, approval_id: str) -> list[dict[str, Any]]:
    """Every vote and decision on an approval, in order: who (name and identity), what, when."""
    out: list[dict[str, Any]] = []
    for r in system.log.read(f"approval-{approval_id}"):
        d = r.data
        if r.type not in ("ApprovalVoted", "ApprovalDecided"):
            continue
        vote = {"actor": d["actor"], "identity": d["identity"], "decision": d.get("decision", "approve")}
        if vote not in [{k: v[k] for k in vote} for v in out]:  # a deciding vote is recorded twice
            out.append({**vote, "at": d["at"], "reason": str((r.meta or {}).get("reason") or "")})
    return out
