"""Paged lists: /sessions' runs, pending approvals and the approval history, after a cursor.

A page costs the rows it shows: the runs and pending approvals are walked from the cursor
in an index kept as the log is folded (counted in `walked`), never sorted whole per request.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from actors import ApprovalRequest, System


def follow(page_fn, limit):
    """Every row of a paged list, following `next` from the start; the pages' sizes too."""
    rows, sizes, after = [], [], None
    while True:
        found, after = page_fn(after, limit)
        rows.extend(found)
        sizes.append(len(found))
        if after is None:
            return rows, sizes


def test_sessions_pages_follow_registration_order_past_deletions_and_re_registrations(system: System):
    broker = system.broker
    tokens = {f"r{n}": broker.register(f"r{n}") for n in range(7)}
    conversations = broker.conversations
    ids, sizes = follow(lambda after, limit: _ids(conversations.sessions_page(after, limit)), 3)
    assert ids == [f"r{n}" for n in range(7)]
    assert sizes == [3, 3, 1]
    first, cursor = conversations.sessions_page(None, 3)
    assert [s["run_id"] for s in first] == ["r0", "r1", "r2"]
    # The run the cursor names is deleted, another is deleted and registered anew, a third
    # re-registers with its token: the next page goes on after the cursor, the run registered
    # anew comes last (its registration is the newest), the re-registered one keeps its place.
    broker.delete_run("r2")
    broker.delete_run("r3")
    broker.register("r3")
    broker.register("r4", tokens["r4"])
    rest, _ = follow(lambda after, limit: _ids(conversations.sessions_page(after or cursor, limit)), 2)
    assert rest == ["r4", "r5", "r6", "r3"]
    assert [s["run_id"] for s in broker.sessions()] == ["r0", "r1", "r4", "r5", "r6", "r3"]
    # Without paging parameters a client still gets every run of a small fleet in one answer.
    everything, more = conversations.sessions_page()
    assert [s["run_id"] for s in everything] == ["r0", "r1", "r4", "r5", "r6", "r3"]
    assert more is None


def test_a_sessions_page_costs_the_page_not_the_fleet(system: System):
    broker = system.broker
    for n in range(3000):
        broker.register(f"fleet-{n:04d}")
    lists = system.views.lists
    page, cursor = broker.conversations.sessions_page(None, 10)  # builds the index: one sort
    index = lists.runs_index
    for _ in range(20):
        before = index.walked
        page, cursor = broker.conversations.sessions_page(cursor, 10)
        assert len(page) == 10
        # Ten rows shown, and the one after them looked at to say there is more.
        assert index.walked - before == 11
    # Runs registered after the index was built are in it, in order.
    broker.register("late")
    tail, _ = follow(lambda after, limit: _ids(broker.conversations.sessions_page(after, limit)), 500)
    assert tail[-2:] == ["fleet-2999", "late"]
    assert len(tail) == 3001


def test_pending_pages_are_oldest_first_and_skip_decided_and_expired(system: System, clock):
    approvals = system.approvals
    ids = []
    for n in range(6):
        clock.advance(1)
        request = ApprovalRequest(kind="shell", title=f"step {n}", detail="ls", risk="low")
        ids.append(approvals.submit(request).id)
    lists = system.views.lists
    pages = follow(lambda after, limit: _page(lists.pending(after, limit)), 4)
    assert [a.id for a in pages[0]] == ids
    first = lists.pending(None, 2)
    approvals.resolve(ids[2], "approve", "alice")
    rest = lists.pending(first.next, 2)
    assert [a.id for a in rest.rows] == [ids[3], ids[4]]
    # Past its deadline an approval is no longer listed, though nothing expired it yet.
    clock.advance(timedelta(days=2).total_seconds())
    assert lists.pending().rows == ()
    with pytest.raises(ValueError, match="cursor of a previous page"):
        lists.pending(after=1_000_000)


def test_history_pages_read_only_the_requests_they_show(system: System):
    approvals = system.approvals
    ids = [approvals.submit(ApprovalRequest(kind="shell", title=f"t{n}", detail="x", risk="low")).id
           for n in range(5)]  # fmt: skip
    approvals.resolve(ids[1], "reject", "bob")
    lists = system.views.lists
    rows, sizes = follow(lambda after, limit: _page(lists.history(after, limit)), 2)
    assert [r.id for r in rows] == ids
    assert sizes == [2, 2, 1]
    assert rows[1].decision == "reject"
    assert [r.id for r in system.views.approval_history()] == ids


def _ids(page):
    sessions, more = page
    return [s["run_id"] for s in sessions], more


def _page(page):
    return list(page.rows), page.next
