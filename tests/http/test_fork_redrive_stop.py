"""A fork re-driven by the server (`POST /api/v1/runs/RUN/fork` with `redrive`) when the server stops.

The re-drive runs in a thread of the server; stopping the server closes its System under it.
That ends the re-drive with one line on the server's log (`flightlog.forks`), never with a
thread's traceback.
"""

from __future__ import annotations

import logging
import threading

from tests.controller.forks import record_origin
from tools.http import fork_routes

from .conftest import OPERATOR

WAIT = 10.0


def test_a_redrive_the_server_stops_under_ends_with_one_line(system, client, monkeypatch, caplog):
    origin = record_origin(system)  # approved by alice
    [row] = [r for r in system.views.approval_history() if r.run_id == origin.run_id]
    go = threading.Event()
    real = fork_routes.redrive

    def held(*args, **kwargs):
        go.wait(WAIT)  # the System closes before the re-drive begins: it cannot finish first
        return real(*args, **kwargs)

    monkeypatch.setattr(fork_routes, "redrive", held)
    body = {"at_approval": row.id, "decision": "approve", "redrive": True}
    response = client.post(f"/api/v1/runs/{origin.run_id}/fork", json=body, headers=OPERATOR)
    assert response.status_code == 201, response.text
    [thread] = [t for t in threading.enumerate() if t.name.startswith("redrive-")]

    system.close()  # as `flightlog serve` does once it has stopped serving
    with caplog.at_level(logging.WARNING, logger="flightlog.forks"):
        go.set()
        thread.join(WAIT)

    assert not thread.is_alive()
    [line] = [r.getMessage() for r in caplog.records if r.name == "flightlog.forks"]
    assert line.startswith("the re-drive of fork ")
    assert "stopped" in line
