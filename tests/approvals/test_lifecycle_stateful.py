"""A stateful model of the approval lifecycle: requests, decisions, time, ticks and restarts.

Invariants after every step, and on both sides of a restart (close + reopen on one file):
a terminal outcome never changes; nothing is approved at or after its deadline; pending =
requested - decided - expired; each waiter in the live System hears the model's outcome.
"""

from __future__ import annotations

import shutil
import tempfile
from concurrent.futures import Future
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from actors import ApprovalError, ApprovalExpiredError, ApprovalNotPendingError, System
from eventlog import ManualClock

from .helpers import WAIT, decided_events, make_request, start_request

RUNS = ["run-a", "run-b"]
Outcome = tuple[str, str] | None  # (decision, actor), or None while pending


class ApprovalLifecycle(RuleBasedStateMachine):
    approvals = Bundle("approvals")

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="flightlog-stateful-"))
        self.clock = ManualClock()
        self.system = self._open()
        self.model: dict[str, Outcome] = {}
        self.expires: dict[str, datetime] = {}
        self.run_of: dict[str, str] = {}
        self.waiters: dict[str, Future[Any]] = {}  # requests blocked in the live System

    def _open(self) -> System:
        return System.open(self.dir / "log.db", clock=self.clock, scheduler=False)

    def _open_ids(self, run: str | None = None) -> list[str]:
        return [i for i, o in self.model.items() if o is None and (run is None or self.run_of[i] == run)]

    def _due(self) -> list[str]:
        return [i for i in self._open_ids() if self.expires[i] <= self.clock.now()]

    # -- rules -----------------------------------------------------------------------------

    @rule(target=approvals, run=st.sampled_from(RUNS), timeout=st.sampled_from([1.0, 5.0, 30.0]))
    def request(self, run: str, timeout: float) -> str:
        deadline = self.clock.now() + timedelta(seconds=timeout)
        future, row = start_request(self.system, make_request(run_id=run), deadline=deadline)
        assert row.expires_at == deadline
        self.model[row.id] = None
        self.expires[row.id] = deadline
        self.run_of[row.id] = run
        self.waiters[row.id] = future
        return row.id

    @rule(id=approvals, decision=st.sampled_from(["approve", "reject"]), actor=st.sampled_from(["al", "bo"]))
    def resolve(self, id: str, decision: str, actor: str) -> None:
        if self.model[id] is not None:
            with pytest.raises(ApprovalNotPendingError):
                self.system.approvals.resolve(id, decision, actor)
        elif self.clock.now() >= self.expires[id]:
            with pytest.raises(ApprovalExpiredError) as err:
                self.system.approvals.resolve(id, decision, actor)
            assert (err.value.resolution.decision, err.value.resolution.actor) == ("expired", "timeout")
            self.model[id] = ("expired", "timeout")
        else:
            resolution = self.system.approvals.resolve(id, decision, actor)
            assert (resolution.decision, resolution.actor) == (decision, actor)
            self.model[id] = (decision, actor)

    @rule(seconds=st.sampled_from([0.5, 1.0, 4.0, 30.0]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule()
    def tick(self) -> None:
        due = self._due()
        assert self.system.tick() == len(due)
        for id in due:
            self.model[id] = ("expired", "timeout")

    @rule(run=st.sampled_from(RUNS))
    def expire_run(self, run: str) -> None:
        expiring = self._open_ids(run)
        self.system.approvals.expire_run(run)
        for id in expiring:  # past its deadline or not: whatever is open is expired by abort
            self.model[id] = ("expired", "abort")

    @rule()
    def restart(self) -> None:
        self.system.close()
        for id, future in self.waiters.items():
            if self.model[id] is None:
                with pytest.raises(ApprovalError, match="closed while waiting"):
                    future.result(WAIT)
        self.waiters = {id: f for id, f in self.waiters.items() if self.model[id] is not None}
        due = self._due()
        self.system = self._open()  # fires the deadlines that passed while it was closed
        for id in due:
            self.model[id] = ("expired", "timeout")

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def history_matches_the_model(self) -> None:
        rows = {row.id: row for row in self.system.views.approval_history()}
        assert set(rows) == set(self.model)
        for id, outcome in self.model.items():
            row = rows[id]
            if outcome is None:
                assert row.status == "pending"
            else:  # once terminal, the model never changes it, so neither may the log
                assert (row.status, row.actor) == outcome
            if row.status == "approve":
                assert row.decided_at is not None
                assert row.decided_at < row.expires_at
        assert all(len(events) == 1 for events in decided_events(self.system.log).values())

    @invariant()
    def pending_is_requested_minus_decided_minus_expired(self) -> None:
        open_ids = set(self._open_ids())
        assert {r.id for r in self.system.views.open_approvals()} == open_ids
        live = {i for i in open_ids if self.clock.now() < self.expires[i]}
        pending = self.system.approvals.pending()
        assert {a.id for a in pending} == live
        assert [a.requested_at for a in pending] == sorted(a.requested_at for a in pending)

    @invariant()
    def waiters_hear_the_outcome(self) -> None:
        for id, future in list(self.waiters.items()):
            outcome = self.model[id]
            if outcome is None:
                continue
            resolution = future.result(WAIT)
            assert (resolution.decision, resolution.actor) == outcome
            del self.waiters[id]

    def teardown(self) -> None:
        self.system.close()
        shutil.rmtree(self.dir, ignore_errors=True)


ApprovalLifecycle.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestApprovalLifecycle = ApprovalLifecycle.TestCase
