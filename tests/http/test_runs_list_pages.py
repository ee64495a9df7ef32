"""GET /api/v1/runs a page at a time: registration order, a cursor that survives deletions and
registrations between pages, and the cost of the page rather than of every run."""

from __future__ import annotations

from typing import Any

from projections import LIST_PAGE

from .conftest import OPERATOR


def _runs(client, **params: str) -> dict[str, Any]:
    response = client.get("/api/v1/runs", headers=OPERATOR, params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_the_runs_come_a_page_at_a_time_in_registration_order(client, register, system):
    for n in range(7):
        register(f"r{n}")
    whole = _runs(client)
    assert [r["run_id"] for r in whole["runs"]] == [f"r{n}" for n in range(7)]
    assert whole["next"] is None
    listed, after, sizes = [], None, []
    while True:
        page = _runs(client, limit="3", **({"after": str(after)} if after is not None else {}))
        listed += page["runs"]
        sizes.append(len(page["runs"]))
        after = page["next"]
        if after is None:
            break
    assert listed == whole["runs"]
    assert sizes == [3, 3, 1]


def test_a_cursor_survives_runs_deleted_and_registered_between_pages(client, register, system):
    for n in range(6):
        register(f"r{n}")
    first = _runs(client, limit="3")
    assert [r["run_id"] for r in first["runs"]] == ["r0", "r1", "r2"]
    system.broker.delete_run("r1")  # before the cursor: an offset would now skip r3
    system.broker.delete_run("r3")  # after it: no longer listed
    register("late")
    rest = _runs(client, limit="10", after=str(first["next"]))
    assert [r["run_id"] for r in rest["runs"]] == ["r4", "r5", "late"]


def test_a_page_walks_the_page_not_every_run(client, register, system):
    for n in range(LIST_PAGE + 50):
        system.broker.create_run(f"r{n:03d}")
    index = system.views.lists.runs_index
    first = _runs(client, limit="5")
    walked = index.walked
    middle = _runs(client, limit="5", after=str(first["next"]))
    assert [r["run_id"] for r in middle["runs"]] == [f"r{n:03d}" for n in range(5, 10)]
    assert index.walked - walked <= 5 + 1  # the page and a look past it for `next`
    default = _runs(client)
    assert len(default["runs"]) == LIST_PAGE
    assert default["next"] is not None


def test_a_made_up_cursor_is_refused(client, register):
    register("r0")
    for params in ({"after": "x"}, {"after": "-1"}, {"limit": "0"}):
        response = client.get("/api/v1/runs", headers=OPERATOR, params=params)
        assert response.status_code == 400, params
