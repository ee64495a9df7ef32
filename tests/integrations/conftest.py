"""A real `flightlog serve` for the framework adapters, and an operator who decides as calls are filed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

import flightlog
from tests.sdk.conftest import BOOTSTRAP, OPERATOR_TOKEN, Served, serving

# (tool, request id) -> ("approve" | "reject", reason), or None to leave the call pending.
Policy = Callable[[str, str], tuple[str, str] | None]
FOLLOW_WAIT = 5  # seconds one look at the log waits for a new record (a long poll, not a sleep)


@pytest.fixture(scope="package")
def served(tmp_path_factory) -> Iterator[Served]:
    """One server for the package's tests (each uses its own run ids): starting one costs seconds."""
    with serving(tmp_path_factory.mktemp("integrations")) as served:
        yield served


def client(served: Served) -> flightlog.Client:
    """An SDK client whose credential creates runs and reads their records (the bootstrap admin's)."""
    return flightlog.Client(served.url, token=OPERATOR_TOKEN)


class Operator:
    """An operator who follows the log and decides each gated call of `run_ids` as it is filed.

    `policy(tool, request_id)` says the decision and its reason. Decisions are made by `name`'s
    own credential. Used as a context manager: it stops (and reports its own failure) on exit.
    """

    def __init__(self, served: Served, policy: Policy, *run_ids: str, name: str = "alice") -> None:
        self.served = served
        self.policy = policy
        self.run_ids = set(run_ids)
        self.name = name
        self.decided: dict[str, str] = {}  # request id -> decision
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._after = head_seq(served)
        self._thread = threading.Thread(target=self._follow, name=f"operator-{name}", daemon=True)

    def __enter__(self) -> Operator:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(FOLLOW_WAIT + 30)
        if self.failure is not None and exc[0] is None:
            raise AssertionError(f"the operator failed: {self.failure!r}") from self.failure

    def _follow(self) -> None:
        try:
            while not self._stop.is_set():
                params = {"after": self._after, "wait": FOLLOW_WAIT}
                page = self.served.http.get("/api/v1/events", params=params, headers=BOOTSTRAP).json()
                for record in page["records"]:
                    self._see(record)
                self._after = page["last_seq"]
        except BaseException as e:  # kept, and raised in the test's thread on exit
            self.failure = e

    def _see(self, record: dict[str, Any]) -> None:
        data = record["data"]
        if record["type"] != "PermissionRequested" or data["run_id"] not in self.run_ids:
            return
        answer = self.policy(data["tool_name"], data["request_id"])
        if answer is None:
            return
        decision, reason = answer
        response = self.served.http.post(
            f"/api/v1/approvals/{data['approval_id']}/{decision}",
            content=orjson.dumps({"reason": reason}),
            headers=self.served.operator(self.name),
        )
        assert response.status_code == 200, response.text
        self.decided[data["request_id"]] = decision


def reports(served: Served, run_id: str) -> list[tuple[str, Any]]:
    """The run's reports in the order recorded: (state, payload)."""
    page = served.http.get("/api/v1/events", params={"run": run_id, "limit": 5000}, headers=BOOTSTRAP).json()
    return [
        (r["data"]["state"], orjson.loads(r["data"]["payload"]) if r["data"]["payload"] else None)
        for r in page["records"]
        if r["type"] == "RunReported"
    ]


def records(served: Served, run_id: str) -> list[dict[str, Any]]:
    """The run's records as the operator API lists them."""
    page = served.http.get("/api/v1/events", params={"run": run_id, "limit": 5000}, headers=BOOTSTRAP).json()
    return list(page["records"])


def head_seq(served: Served) -> int:
    """The seq of the log's last record."""
    return int(served.http.get("/api/v1/events", params={"after": 2**62}, headers=BOOTSTRAP).json()["head"])
