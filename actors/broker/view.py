"""The broker's view of one run, folded from its stream (what `Broker.get_run` returns)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from eventlog import Record, readable

from .._aggregate import UNREADABLE
from .model import ControlMessage, Finish, PermissionState, Reply, Report, RunView


def fold_run_view(records: Iterable[Record]) -> RunView | None:
    """The run's current view from its stream's records, or None if it is not registered.

    Records that do not fit the event catalogue are skipped (and noted in UNREADABLE).
    """
    view: RunView | None = None
    queue: list[ControlMessage] = []  # a list, as the seed's: message ids may repeat
    reports: list[Report] = []
    finishes: list[Finish] = []
    replies: list[Reply] = []
    permissions: dict[str, PermissionState] = {}
    decisions: dict[str, str] = {}
    registered_at = last_seen = None
    revoked = False
    for r in readable(records, UNREADABLE):
        d = r.data
        t = r.type
        if t == "RunRegistered":
            queue, reports, finishes, replies, permissions, decisions = [], [], [], [], {}, {}
            registered_at = r.recorded_at if d["registered_at"] is not None else None
            last_seen = r.recorded_at
            revoked = False
            # Who created it: records older than these fields have none.
            view = RunView(
                d["run_id"], registered_at, last_seen, origin=d.get("origin", ""),
                created_by=d.get("by", ""), created_by_credential=d.get("by_credential", ""),
            )  # fmt: skip
            continue
        if t == "RunDeleted":
            view = None
            continue
        if view is None:
            continue
        if t == "RunTokenRevoked" or t == "RunRekeyed":
            revoked = t == "RunTokenRevoked"  # an operator's act: the run was not seen
            continue
        last_seen = r.recorded_at if t != "ControlQueued" and t != "ControlDelivered" else last_seen
        if t == "RunRegistrationRefreshed":
            registered_at = r.recorded_at
        elif t == "ControlQueued":
            queue.append(
                ControlMessage(
                    d["message_id"],
                    d["type"],
                    d["run_id"],
                    d["from_run_id"],
                    d["payload"],
                    r.recorded_at,
                    d.get("sent_by", ""),
                )
            )
        elif t == "ControlDelivered":
            taken = Counter(d["message_ids"])  # one delivery per listed id, oldest first
            kept = []
            for m in queue:
                if taken[m.id]:
                    taken[m.id] -= 1
                else:
                    kept.append(m)
            queue = kept
        elif t == "RunReported":
            reports.append(Report(d["run_id"], d["state"], d["payload"]))
        elif t == "RunFinished":
            finishes.append(
                Finish(d["run_id"], d["status"], d["summary"], tuple(d["files_changed"]), d["payload"])
            )
        elif t == "RunReplied":
            replies.append(Reply(d["run_id"], d["to"], d["payload"]))
        elif t == "PermissionRequested":
            permissions[d["request_id"]] = PermissionState(
                d["request_id"],
                d["tool_name"],
                d["description"],
                d["input_preview"],
                r.recorded_at,
                d["approval_id"],
            )
        elif t == "PermissionDecided":
            decisions[d["request_id"]] = d["behavior"]
    if view is None or last_seen is None:
        return None
    return RunView(
        view.run_id,
        registered_at,
        last_seen,
        tuple(queue),
        tuple(reports),
        tuple(finishes),
        tuple(replies),
        permissions,
        decisions,
        view.origin,
        view.created_by,
        view.created_by_credential,
        revoked,
    )
