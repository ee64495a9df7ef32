"""A long run's pages cost what they show: the records a request reads from the log are the
same for a run ten times as long (issue 28, "Pages cost what they show").

Records are counted as the log hands them out (a counting wrapper around `read` and
`read_all`), not timed: the count is what grows if a page folds the run from its start, reads
its stream again per request, or reads far past what it shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from actors import System, make_token, token_digest
from eventlog import ANY, EventLog, ManualClock, open_log
from eventlog.events import RunRegistered, RunReported
from tools.http import create_app

from .conftest import BASE, PortalTransport

T0 = datetime(2026, 1, 1, tzinfo=UTC)
LIMIT = 100
EVERY = 64  # versions between two per-run checkpoints


class Counted:
    """How many records `log`'s reads have handed out since `reset`."""

    def __init__(self, log: EventLog) -> None:
        self.records = 0
        read, read_all = log.read, log.read_all

        def counted(reader: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
            def wrapper(*args: Any, **kwargs: Any) -> Iterator[Any]:
                for record in reader(*args, **kwargs):
                    self.records += 1
                    yield record

            return wrapper

        log.read = counted(read)  # type: ignore[method-assign]
        log.read_all = counted(read_all)  # type: ignore[method-assign]

    def cost(self, client: httpx.Client, url: str) -> int:
        before = self.records
        response = client.get(url)
        assert response.status_code == 200, response.text
        return self.records - before


def _costs(tmp_path, portal, reports: int) -> dict[str, int]:
    """The records each kind of page of a run of `reports` reports reads, once the run was read."""
    path = str(tmp_path / f"run-{reports}.db")
    clock = ManualClock(T0)
    with open_log(path, clock=clock) as log:
        log.append("run-long", [RunRegistered("long", "0" * 64, T0, T0)], expect=ANY)
        for lo in range(0, reports, 5_000):
            batch = [RunReported("long", "working", f'{{"n": {n}}}', T0 + timedelta(seconds=n))
                     for n in range(lo, min(lo + 5_000, reports))]  # fmt: skip
            log.append("run-long", batch, expect=ANY)
        seqs = [r.seq for r in log.read("run-long")]
    token = make_token()
    with System.open(path, clock=clock, scheduler=False) as system:
        counted = Counted(system.log)
        app = create_app(system, operator_token_sha256=token_digest(token))
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(transport=PortalTransport(app, portal), base_url=BASE, headers=headers) as client:
            travel = f"/api/v1/console/runs/long/travel?limit={LIMIT}"
            detail = f"/api/v1/runs/long?limit={LIMIT}"
            client.get(travel)  # the first reads fold the run once (and make its checkpoints)
            client.get(detail)
            middle = seqs[len(seqs) // 2]
            return {
                "live": counted.cost(client, travel),
                "travelled": counted.cost(client, f"{travel}&at={middle}"),
                "travelled early": counted.cost(client, f"{travel}&at={seqs[LIMIT // 2]}"),
                "older page": counted.cost(client, f"{travel}&before={reports // 2}"),
                "detail": counted.cost(client, detail),
                "older detail": counted.cost(client, f"{detail}&before={middle}"),
            }


def test_a_long_runs_pages_cost_what_they_show(tmp_path, portal):
    short = _costs(tmp_path, portal, 2_000)
    long = _costs(tmp_path, portal, 20_000)
    # Where k falls between two checkpoints differs from run to run: a few dozen records.
    for name, cost in long.items():
        assert cost <= short[name] + 2 * EVERY, (name, short, long)
    # And what each reads is the page and what changed since, plus a checkpoint's distance:
    # a travelled page reads its page (then), its window and the page after it (now), and
    # the run's head.
    assert long["live"] <= LIMIT + 3 * EVERY, long
    assert long["travelled"] <= 3 * LIMIT + 6 * EVERY, long
    assert long["older page"] <= 2 * LIMIT + 4 * EVERY, long
    assert long["detail"] <= 2 * LIMIT, long
    assert long["older detail"] <= 2 * LIMIT + 2 * EVERY, long
