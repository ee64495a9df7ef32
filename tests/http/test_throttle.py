"""AuthThrottle: failed operator authentications blocked per address, on a manual clock."""

from __future__ import annotations

import itertools
import logging
import re
import sys
import threading

import pytest

from tools.http.throttle import UNKNOWN, AuthThrottle, retry_after_header

LOGGER = "flightlog.security"
ATTACKER = "203.0.113.7"
BYSTANDER = "198.51.100.2"


class Clock:
    """Monotonic seconds that move only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def throttle(clock: Clock) -> AuthThrottle:
    return AuthThrottle(clock)


def attempt(throttle: AuthThrottle, address: str | None, right: bool) -> int:
    """The status a handler answers, wired as the module says: throttle first, credential second."""
    if throttle.retry_after(address) is not None:
        return 429
    if not right:
        return 429 if throttle.failed(address) is not None else 401
    throttle.succeeded(address)
    return 200


def fail(throttle: AuthThrottle, address: str | None, times: int) -> list[float | None]:
    return [throttle.failed(address) for _ in range(times)]


def security_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_blocks_after_limit_failures(throttle):
    assert fail(throttle, ATTACKER, 4) == [None] * 4
    assert throttle.retry_after(ATTACKER) is None
    assert throttle.failed(ATTACKER) == 30.0  # the fifth failure starts the block
    assert throttle.retry_after(ATTACKER) == 30.0


def test_right_token_is_refused_while_blocked(throttle):
    assert [attempt(throttle, ATTACKER, right=False) for _ in range(5)] == [401] * 4 + [429]
    # The guess that would be right is never checked: guessing during a block is worth nothing.
    assert attempt(throttle, ATTACKER, right=True) == 429


def test_block_ends_after_its_length(throttle, clock):
    fail(throttle, ATTACKER, 5)
    clock.advance(29.5)
    assert throttle.retry_after(ATTACKER) == pytest.approx(0.5)
    clock.advance(0.5)
    assert throttle.retry_after(ATTACKER) is None
    assert attempt(throttle, ATTACKER, right=True) == 200


def test_failures_spread_wider_than_the_window_never_block(throttle, clock):
    for _ in range(20):
        assert throttle.failed(ATTACKER) is None
        clock.advance(15.0)  # 4 failures per 60 s: one short of the limit in any window


def test_the_window_slides(throttle, clock):
    fail(throttle, ATTACKER, 4)
    clock.advance(59.0)
    # A fixed window restarting at 60 s would let 4 more through; the last 5 are within 60 s.
    assert throttle.failed(ATTACKER) == 30.0


def test_failures_during_a_block_meet_it_without_lengthening_it(throttle, clock):
    fail(throttle, ATTACKER, 5)
    clock.advance(10.0)
    assert throttle.failed(ATTACKER) == 20.0
    assert throttle.retry_after(ATTACKER) == 20.0


def test_repeated_incidents_grow_the_block_up_to_the_cap(throttle, clock):
    lengths = []
    for _ in range(8):
        lengths.append(fail(throttle, ATTACKER, 5)[-1])
        clock.advance(lengths[-1])
    assert lengths == [30.0, 60.0, 120.0, 240.0, 480.0, 900.0, 900.0, 900.0]


def test_growth_is_forgotten_after_a_quiet_spell(throttle, clock):
    fail(throttle, ATTACKER, 5)
    clock.advance(30.0)
    assert fail(throttle, ATTACKER, 5)[-1] == 60.0
    clock.advance(60.0 + 3600.0 + 1)
    assert fail(throttle, ATTACKER, 5)[-1] == 30.0


def test_growth_is_forgotten_by_an_address_seen_all_along(throttle, clock):
    fail(throttle, ATTACKER, 5)
    clock.advance(30.0)
    for _ in range(5):
        clock.advance(1800.0)
        throttle.failed(ATTACKER)  # a stray failure now and then: never quiet, never blocked
    assert fail(throttle, ATTACKER, 5)[-1] == 30.0  # over an hour since the last block ended


def test_other_addresses_are_unaffected(throttle):
    fail(throttle, ATTACKER, 5)
    assert throttle.retry_after(BYSTANDER) is None
    assert attempt(throttle, BYSTANDER, right=True) == 200
    # The bystander's own count starts from nothing.
    assert fail(throttle, BYSTANDER, 4) == [None] * 4


def test_success_clears_the_failure_count(throttle):
    fail(throttle, ATTACKER, 4)
    throttle.succeeded(ATTACKER)
    assert fail(throttle, ATTACKER, 4) == [None] * 4
    assert throttle.failed(ATTACKER) == 30.0


def test_success_does_not_lift_a_block(throttle):
    fail(throttle, ATTACKER, 5)
    throttle.succeeded(ATTACKER)  # a race: the success was checked before the block began
    assert throttle.retry_after(ATTACKER) == 30.0


def test_success_forgets_an_address_with_nothing_to_remember(throttle):
    fail(throttle, ATTACKER, 2)
    assert len(throttle) == 1
    throttle.succeeded(ATTACKER)
    assert len(throttle) == 0
    throttle.succeeded(BYSTANDER)  # never seen: nothing is made for it
    throttle.retry_after(BYSTANDER)
    assert len(throttle) == 0


def test_no_address_is_one_bucket(throttle):
    fail(throttle, None, 3)
    fail(throttle, "", 1)
    assert throttle.failed(UNKNOWN) == 30.0
    assert throttle.retry_after(None) == 30.0
    assert throttle.retry_after("") == 30.0


def test_memory_stays_bounded_under_a_flood_of_addresses(throttle):
    for n in range(100_000):
        throttle.failed(f"10.{n >> 16}.{(n >> 8) & 255}.{n & 255}")
    assert len(throttle) == 10_000
    # The newest are kept, their failure remembered: the least recently seen went first.
    assert fail(throttle, "10.1.134.159", 4)[-1] == 30.0  # n = 99,999
    assert fail(throttle, "10.0.0.0", 4)[-1] is None  # n = 0
    assert len(throttle) == 10_000


def test_an_attacker_who_keeps_trying_stays_blocked_through_a_flood(clock):
    throttle = AuthThrottle(clock, max_addresses=10)
    fail(throttle, ATTACKER, 5)
    for n in range(100):
        throttle.failed(f"10.0.0.{n}")
        # Each refused attempt makes the attacker the most recently seen: the flood evicts others.
        assert throttle.retry_after(ATTACKER) is not None
    assert len(throttle) == 10


def test_a_full_table_ends_the_incidents_it_drops(clock, caplog):
    throttle = AuthThrottle(clock, max_addresses=10)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for n in range(30):
            fail(throttle, f"10.0.0.{n}", 5)
    assert len(throttle) == 10
    lines = security_lines(caplog)
    assert sum("blocked for" in line for line in lines) == 30
    assert sum("forgotten while blocked" in line for line in lines) == 20
    caplog.clear()
    clock.advance(30.0)
    throttle.retry_after(BYSTANDER)
    # Only the ten still tracked had an incident left to end: the dropped ones were closed then.
    assert sum("block over" in line for line in security_lines(caplog)) == 10


def test_quiet_addresses_are_forgotten(throttle, clock):
    for n in range(3):
        throttle.failed(f"10.0.0.{n}")
    clock.advance(3600.0)
    throttle.retry_after(BYSTANDER)
    assert len(throttle) == 0


def test_one_line_when_an_incident_starts_and_one_when_it_ends(throttle, clock, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        fail(throttle, ATTACKER, 5)
        for _ in range(20):
            attempt(throttle, ATTACKER, right=True)
        fail(throttle, ATTACKER, 3)
        assert len(security_lines(caplog)) == 1
        clock.advance(30.0)
        # The end is noticed by the next call, whichever address makes it.
        throttle.retry_after(BYSTANDER)
        fail(throttle, ATTACKER, 4)
    lines = security_lines(caplog)
    assert len(lines) == 2
    assert all(r.levelno == logging.WARNING for r in caplog.records)
    assert "203.0.113.7" in lines[0]
    assert "5 failures within 60 s" in lines[0]
    assert "refused for 30 s" in lines[0]
    assert "23 attempts refused during the 30 s block" in lines[1]


# Every line the throttle writes, with its address and numbers taken out: nothing else can appear.
SKELETONS = {
    "flightlog: operator authentication blocked for ADDR: "
    "N failures within N s; refused for N s (incident N)",
    "flightlog: operator authentication block for ADDR ended (block over): "
    "N attempts refused during the N s block",
    "flightlog: operator authentication block for ADDR ended "
    "(forgotten while blocked: more than N addresses): "
    "N attempts refused during the N s block",
}


def test_log_lines_hold_only_the_address_and_numbers(clock, caplog):
    throttle = AuthThrottle(clock, max_addresses=1)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for address in (ATTACKER, BYSTANDER):
            for _ in range(5):
                attempt(throttle, address, right=False)
            attempt(throttle, address, right=True)
        clock.advance(30.0)
        throttle.retry_after(ATTACKER)
    records = [r for r in caplog.records if r.name == LOGGER]
    assert len(records) == 4
    skeletons = set()
    for record in records:
        assert all(isinstance(arg, (str, int, float)) for arg in record.args)
        message = record.getMessage().replace(repr(ATTACKER), "ADDR").replace(repr(BYSTANDER), "ADDR")
        skeletons.add(re.sub(r"\d+(\.\d+)?", "N", message))
    assert skeletons == SKELETONS


def test_control_characters_in_an_address_stay_escaped(throttle, caplog):
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        fail(throttle, "evil\n\x1b[2Jforged line", 5)
    (line,) = security_lines(caplog)
    assert "\n" not in line
    assert "\x1b" not in line


def test_long_addresses_are_cut(throttle):
    fail(throttle, "a" * 100 + "x", 4)
    assert throttle.failed("a" * 100 + "y") == 30.0  # one key: cut to 100 characters


@pytest.mark.parametrize(
    ("seconds", "header"),
    [
        (30.0, "30"),
        (29.1, "30"),
        (0.2, "1"),
        (0.0, "1"),
        (-3.0, "1"),
        (float("nan"), "1"),
        ((100.1 + 30.0) - 100.1, "30"),  # 30.000000000000014: a float's last bit adds no second
    ],
)
def test_retry_after_header(seconds, header):
    assert retry_after_header(seconds) == header
    assert AuthThrottle.retry_after_header(seconds) == header


@pytest.mark.parametrize(
    "settings",
    [
        {"limit": 0},
        {"max_addresses": 0},
        {"window": 0.0},
        {"block": 0.0},
        {"block": 1000.0},
        {"growth": 0.5},
        {"forget_after": 60.0},
        {"block": 1.0, "growth": 1.001},
    ],
)
def test_nonsense_settings_are_refused(clock, settings):
    with pytest.raises(ValueError, match=r"."):
        AuthThrottle(clock, **settings)


def test_no_growth_keeps_one_length(clock):
    throttle = AuthThrottle(clock, growth=1.0)
    for _ in range(3):
        assert fail(throttle, ATTACKER, 5)[-1] == 30.0
        clock.advance(30.0)


def test_threads_share_one_consistent_count(throttle, clock, caplog):
    threads, calls = 8, 500
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def hammer(n: int) -> None:
        try:
            start.wait(timeout=10)
            for i in range(calls):
                throttle.failed(ATTACKER)
                throttle.retry_after(f"10.0.{n}.{i % 4}")
                throttle.failed(f"10.0.{n}.{i % 4}")
                throttle.succeeded(f"10.0.{n}.{i % 4}")
        except BaseException as e:
            errors.append(e)

    switch = sys.getswitchinterval()
    # Switching threads every microsecond makes a missing lock show: a lost update or a second block.
    sys.setswitchinterval(1e-6)
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            workers = [threading.Thread(target=hammer, args=(n,)) for n in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join(timeout=60)
            assert not any(worker.is_alive() for worker in workers)
            clock.advance(30.0)
            throttle.retry_after(BYSTANDER)
    finally:
        sys.setswitchinterval(switch)
    assert errors == []
    # The clock never moved while the threads ran, so exactly 5 of the shared address's
    # failures counted and every other one met the block: a lost update would break either.
    lines = security_lines(caplog)
    assert len(lines) == 2
    assert f"{threads * calls - 5} attempts refused" in lines[1]
    # Each thread's own addresses always succeeded after one failure: none was ever blocked.
    assert len(throttle) == 1


def test_threads_account_for_every_attempt_across_many_incidents(caplog):
    threads, calls = 8, 2000
    ticks = itertools.count()  # next() on a count is atomic: each call of the clock moves it one second
    throttle = AuthThrottle(lambda: float(next(ticks)), growth=1.0)
    start = threading.Barrier(threads)
    answered = [0] * threads  # attempts each thread saw refused or blocked
    errors: list[BaseException] = []

    def hammer(n: int) -> None:
        try:
            start.wait(timeout=10)
            for _ in range(calls):
                answered[n] += throttle.failed(ATTACKER) is not None
                answered[n] += throttle.retry_after(ATTACKER) is not None
        except BaseException as e:
            errors.append(e)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # as above: many switches, so that races get their chance
    try:
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            workers = [threading.Thread(target=hammer, args=(n,)) for n in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join(timeout=60)
            assert not any(worker.is_alive() for worker in workers)
            for _ in range(31):
                throttle.retry_after(BYSTANDER)  # the clock passes the last block's end
    finally:
        sys.setswitchinterval(switch)
    assert errors == []
    lines = security_lines(caplog)
    starts = [line for line in lines if "blocked for" in line]
    ends = [int(re.search(r"(\d+) attempts refused", line)[1]) for line in lines if "ended" in line]
    assert len(starts) > 10  # many incidents, each a chance for a race
    assert len(ends) == len(starts)
    # Each incident is numbered once, in order: two threads never start the same block twice.
    assert [int(re.search(r"incident (\d+)", line)[1]) for line in starts] == list(range(1, len(starts) + 1))
    # Every answer that was not "go ahead" either started an incident or was counted as refused.
    assert sum(ends) == sum(answered) - len(starts)
