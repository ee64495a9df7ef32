"""A fork is re-driven once on every backend: the log's expected versions decide, not memory."""

from __future__ import annotations

import pytest

from actors import ForkRedrivenError, System, fork_run
from eventlog import ManualClock
from tests.controller.forks import record_origin
from tests.controller.helpers import ManualHarness


def test_a_fork_folded_before_another_process_re_drove_it_loses_in_the_log(log_factory, clock: ManualClock):
    with (
        System.open(log_factory(clock=clock), clock=clock, scheduler=False) as first,
        System.open(log_factory(clock=clock), clock=clock, scheduler=False) as second,
    ):
        origin = record_origin(first)
        fork = fork_run(first.log, origin.run_id, origin.points["finished"], actor="alice")
        stale = second.fork_controller(fork.run_id, ManualHarness())  # still sees it awaiting
        assert stale.status() == "starting"
        first.fork_controller(fork.run_id, ManualHarness()).redrive()
        head = first.log.head()
        late = ManualHarness()
        with pytest.raises(ForkRedrivenError):
            second.fork_controller(fork.run_id, late).redrive()
        with pytest.raises(ForkRedrivenError):
            stale.redrive()  # its check passed in memory: the append that resumes it is refused
        assert first.log.head() == head
        log = first.log
    types = [r.type for r in log.read(fork.stream)]
    assert types.count("ControllerStarted") == 1
    assert types.count("ControllerClosed") == 1  # the winner's, when its System closed it
