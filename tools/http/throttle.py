"""Failed operator authentications, throttled per client address.

An address that fails `limit` times within `window` seconds is blocked: until the block ends
every attempt from it is refused (429 with `Retry-After`) before its credential is looked at,
so the right token guessed during a block is worth nothing. Each new block of the same
address is `growth` times longer than the last, up to `max_block`; a block that starts more
than `forget_after` seconds after the previous one ended counts as a first one again.

Nothing here waits: every call takes a lock for a few dictionary operations and answers at
once, so other clients are never slowed. Memory is bounded: at most `max_addresses` addresses
are tracked, the least recently seen is dropped first, and an address quiet for
`forget_after` seconds is forgotten.

Each incident is logged twice on `flightlog.security`: one WARNING when the address is
blocked (address, failures, seconds), one when the block ends or the address is dropped
while blocked (how many attempts were refused meanwhile). The end is noticed by the first
call after it, from any address. No credential reaches this module, so none can be logged.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

UNKNOWN = "unknown"  # the one bucket of clients whose address the server does not know
MAX_ADDRESS_CHARS = 100  # longer keys are cut: an IPv6 address with its zone fits in 100
_MAX_LENGTHS = 64  # distinct block lengths: each costs a look per call while one of its blocks is on
_PRUNE_PER_CALL = 4  # forgotten addresses dropped per call: enough to drain, never a long pause

logger = logging.getLogger("flightlog.security")

# A log line queued under the lock, written after it: (format, arguments).
_Line = tuple[str, tuple[object, ...]]


def retry_after_header(seconds: float) -> str:
    """The `Retry-After` value for a wait of `seconds`: whole seconds, rounded up, at least 1."""
    if not seconds > 0:  # also NaN
        return "1"
    # Rounded to the microsecond first: a float's last bit must not add a second (30.000000000000004).
    return str(max(1, math.ceil(round(seconds, 6))))


class _Address:
    """What is known of one client address: its recent failures and its current block."""

    __slots__ = (
        "blocked_until",
        "failures",
        "key",
        "last_block_end",
        "last_seen",
        "open",
        "refused",
        "strikes",
    )

    def __init__(self, key: str, limit: int, now: float) -> None:
        self.key = key
        self.failures: deque[float] = deque(maxlen=limit)  # times of the last `limit` failures
        self.last_seen = now
        self.blocked_until = -math.inf
        self.last_block_end = -math.inf
        self.strikes = 0  # blocks so far: the index of the next block's length
        self.refused = 0  # attempts refused during the current block
        self.open: int | None = None  # the index of the block length, while an incident is open


class AuthThrottle:
    """Per-address limits on failed operator authentications (see the module).

    Thread-safe: call it from the event loop and from threadpool threads alike. `clock` gives
    monotonic seconds; a block lasts `block` seconds, then `growth` times more per repeated
    incident, at most `max_block`.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        *,
        limit: int = 5,
        window: float = 60.0,
        block: float = 30.0,
        growth: float = 2.0,
        max_block: float = 15 * 60.0,
        max_addresses: int = 10_000,
        forget_after: float = 3600.0,
        log: logging.Logger = logger,
    ) -> None:
        if limit < 1 or max_addresses < 1:
            raise ValueError("limit and max_addresses must be at least 1")
        if not (window > 0 and 0 < block <= max_block and growth >= 1):
            raise ValueError("need window > 0, 0 < block <= max_block and growth >= 1")
        if not forget_after >= max(window, max_block):
            # An address can then be forgotten only once its block and its window have ended.
            raise ValueError("forget_after must be at least window and max_block")
        self._clock = clock
        self._limit = limit
        self._window = window
        self._max_addresses = max_addresses
        self._forget_after = forget_after
        self._log = log
        self._lengths = _block_lengths(block, growth, max_block)
        self._lock = threading.Lock()
        # Least recently seen first: the front is what is forgotten or evicted first.
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        # Open incidents per block length, oldest first: blocks of one length end in the order
        # they began, so the first of each is the next to end (a handful of lengths, each O(1)).
        self._open: dict[int, OrderedDict[str, _Address]] = {}
        # Log lines queued under the lock and written after it, by one thread at a time.
        self._pending: deque[_Line] = deque()
        self._writing = threading.Lock()

    # The header's value, also reachable from the throttle a handler holds.
    retry_after_header = staticmethod(retry_after_header)

    def __len__(self) -> int:
        """How many addresses are tracked now."""
        with self._lock:
            return len(self._addresses)

    def retry_after(self, address: str | None) -> float | None:
        """Seconds `address` must still wait if it is blocked now (its attempt refused), else None.

        Call it before checking the credential: a blocked address is refused even with the right one.
        """
        key = _key(address)
        with self._lock:
            now = self._clock()
            self._tidy(now)
            entry = self._addresses.get(key)
            wait = None if entry is None else self._refuse(entry, now)
        self._write()
        return wait

    def failed(self, address: str | None) -> float | None:
        """Record a failed authentication; the seconds to wait if this failure starts or meets a block."""
        key = _key(address)
        with self._lock:
            now = self._clock()
            self._tidy(now)
            entry = self._track(key, now)
            wait = self._refuse(entry, now)
            if wait is None:
                entry.failures.append(now)
                if len(entry.failures) == self._limit and now - entry.failures[0] < self._window:
                    wait = self._block(entry, now)
        self._write()
        return wait

    def succeeded(self, address: str | None) -> None:
        """Record a successful authentication: it clears the address's failures, not a block in progress."""
        key = _key(address)
        with self._lock:
            now = self._clock()
            self._tidy(now)
            entry = self._addresses.get(key)
            if entry is not None:
                entry.failures.clear()
                if entry.open is None and now - entry.last_block_end > self._forget_after:
                    del self._addresses[key]  # nothing left worth remembering
        self._write()

    # Everything below runs under the lock.

    def _refuse(self, entry: _Address, now: float) -> float | None:
        """The wait left if `entry` is blocked, counting the refused attempt; else None."""
        if entry.blocked_until <= now:
            return None
        entry.refused += 1
        self._seen(entry, now)
        return entry.blocked_until - now

    def _block(self, entry: _Address, now: float) -> float:
        """Start an incident for `entry` and return its length."""
        if now - entry.last_block_end > self._forget_after:
            entry.strikes = 0
        index = min(entry.strikes, len(self._lengths) - 1)
        length = self._lengths[index]
        failures = len(entry.failures)
        entry.strikes += 1
        entry.blocked_until = now + length
        entry.refused = 0
        entry.failures.clear()
        entry.open = index
        self._open.setdefault(index, OrderedDict())[entry.key] = entry
        self._pending.append(
            (
                "flightlog: operator authentication blocked for %r: %d failures within %g s; "
                "refused for %g s (incident %d)",
                (entry.key, failures, self._window, length, entry.strikes),
            )
        )
        return length

    def _track(self, key: str, now: float) -> _Address:
        """The entry of `key`, made (evicting the least recently seen if full) if it is not tracked."""
        entry = self._addresses.get(key)
        if entry is not None and now - entry.last_seen >= self._forget_after:
            self._drop(entry)  # quiet for long enough: it starts afresh
            entry = None
        if entry is None:
            while len(self._addresses) >= self._max_addresses:
                self._drop(next(iter(self._addresses.values())))
            entry = self._addresses[key] = _Address(key, self._limit, now)
        self._seen(entry, now)
        return entry

    def _seen(self, entry: _Address, now: float) -> None:
        entry.last_seen = now
        self._addresses.move_to_end(entry.key)

    def _tidy(self, now: float) -> None:
        """End the incidents whose block is over, and forget a few addresses quiet for long enough."""
        if self._open:
            for incidents in list(self._open.values()):
                while incidents:
                    entry = next(iter(incidents.values()))
                    if entry.blocked_until > now:
                        break
                    self._close(entry, "block over")  # drops the queue once it is empty
        for _ in range(_PRUNE_PER_CALL):
            if not self._addresses:
                break
            oldest = next(iter(self._addresses.values()))
            if now - oldest.last_seen < self._forget_after:
                break
            self._drop(oldest)

    def _drop(self, entry: _Address) -> None:
        """Stop tracking `entry`, ending its incident if one is open (only when the table is full)."""
        del self._addresses[entry.key]
        self._close(entry, f"forgotten while blocked: more than {self._max_addresses} addresses")

    def _close(self, entry: _Address, why: str) -> None:
        """End `entry`'s incident if one is open: out of its length's queue, one line saying how it went."""
        index = entry.open
        if index is None:
            return
        incidents = self._open[index]
        del incidents[entry.key]
        if not incidents:
            del self._open[index]
        entry.open = None
        entry.last_block_end = entry.blocked_until
        self._pending.append(
            (
                "flightlog: operator authentication block for %r ended (%s): "
                "%d attempts refused during the %g s block",
                (entry.key, why, entry.refused, self._lengths[index]),
            )
        )

    def _write(self) -> None:
        """Write the pending lines, in the order they were queued, unless another thread is at it."""
        # Called without the lock: a slow log handler then delays only the thread writing, never
        # a caller with nothing to write. The outer test catches lines queued while it let go.
        while self._pending and self._writing.acquire(blocking=False):
            try:
                while self._pending:
                    message, args = self._pending.popleft()  # only the writer pops: never empty here
                    self._log.warning(message, *args)
            finally:
                self._writing.release()


def _block_lengths(block: float, growth: float, max_block: float) -> tuple[float, ...]:
    """The successive block lengths: `block`, then `growth` times more each time, ending at `max_block`."""
    lengths = [block]
    while growth > 1 and lengths[-1] < max_block:
        if len(lengths) == _MAX_LENGTHS:
            raise ValueError(
                f"block lengths from {block} to {max_block} by {growth} take over {_MAX_LENGTHS} steps"
            )
        lengths.append(min(lengths[-1] * growth, max_block))
    return tuple(lengths)


def _key(address: str | None) -> str:
    """The table key of a client address (None and "" are one client, "unknown")."""
    return address[:MAX_ADDRESS_CHARS] if address else UNKNOWN
