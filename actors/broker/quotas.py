"""What one run may send and hold: field sizes, a write rate, open requests; and the rate's buckets.

Every bound a principal can push against is here with its default, and `flightlog serve`
takes each as an option. Going over one is a `TooLargeError` (HTTP 413) or a `TooManyError`
(HTTP 429, with the seconds after which waiting helps), and records nothing.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .._broker_errors import TooLargeError, TooManyError

KIB = 1024


@dataclass(frozen=True, slots=True)
class Quotas:
    """The bounds of one run's traffic (0 turns a bound off).

    `payload_bytes` bounds the JSON payload of a report, finish, reply, message or ask;
    `text_bytes` each other text field a run writes (a state, status, summary, the files
    changed together, a permission request's tool name, description and preview);
    `peer_field_bytes` each peer field at /register (label, backend, model, dir, status).
    `events_per_second` and `burst` are each run's token bucket over its writes;
    `open_permissions` and `open_asks` how many of a run's permission requests and asks may
    wait at once; `queue_share` how many undelivered messages one run may hold in another's
    queue (0: a quarter of the queue's limit); `queue_bytes` the payload bytes of all the
    undelivered messages from runs in one run's queue (what they hold in a server's memory).
    """

    payload_bytes: int = 64 * KIB
    text_bytes: int = 4 * KIB
    peer_field_bytes: int = 256
    events_per_second: float = 50.0
    burst: int = 200
    open_permissions: int = 64
    open_asks: int = 32
    queue_share: int = 0
    queue_bytes: int = 4 * KIB * KIB

    def share_of(self, queue_limit: int) -> int:
        """A sender's share of a queue holding at most `queue_limit` messages from runs (0: none)."""
        if self.queue_share:
            return self.queue_share
        return max(1, queue_limit // 4) if queue_limit else 0

    def check_payload(self, what: str, payload: str | None) -> None:
        """TooLargeError if the payload's text is longer than `payload_bytes`."""
        if payload is not None and self.payload_bytes and _size(payload) > self.payload_bytes:
            raise TooLargeError(f"{what} payload too large: at most {self.payload_bytes} bytes")

    def check_texts(self, what: str, fields: Iterable[tuple[str, str]]) -> None:
        """TooLargeError naming the first (name, text) field longer than `text_bytes`."""
        if not self.text_bytes:
            return
        for name, text in fields:
            if _size(text) > self.text_bytes:
                raise TooLargeError(f"{what} {name} too large: at most {self.text_bytes} bytes")

    def check_peer_fields(self, fields: Iterable[tuple[str, str]]) -> None:
        """TooLargeError naming the first peer field longer than `peer_field_bytes`."""
        if not self.peer_field_bytes:
            return
        for name, text in fields:
            if _size(text) > self.peer_field_bytes:
                raise TooLargeError(f"{name} too large: at most {self.peer_field_bytes} bytes")


def _size(text: str) -> int:
    # UTF-8 takes at most 4 bytes a character: most texts are decided without encoding.
    if len(text) * 4 <= 64:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


class Buckets:
    """A token bucket per run: `rate` tokens a second, up to `burst`; thread-safe.

    Memory is bounded by the runs writing now: a bucket that has refilled is the same as no
    bucket, so at most `max_buckets` are kept, the full ones dropped first, then the oldest.
    """

    def __init__(
        self, rate: float, burst: int, *, max_buckets: int = 10_000, now: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self.max_buckets = max_buckets
        self._now = now
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # run id -> (tokens, at), oldest use first

    def take(self, run_id: str) -> None:
        """Spend one token of the run's bucket; TooManyError (with `retry_after`) if it is empty."""
        if self.rate <= 0:
            return
        with self._lock:
            now = self._now()
            tokens, at = self._buckets.pop(run_id, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - at) * self.rate)
            if tokens < 1:
                self._buckets[run_id] = (tokens, now)
                wait = (1 - tokens) / self.rate
                raise TooManyError(
                    f"run {run_id} writes too fast: at most {self.rate:g} events a second "
                    f"(bursts of {self.burst})",
                    retry_after=max(1.0, math.ceil(wait)),
                )
            self._buckets[run_id] = (tokens - 1, now)
            if len(self._buckets) > self.max_buckets:
                self._shrink(now)

    def _shrink(self, now: float) -> None:
        rate, burst = self.rate, self.burst
        full = [id for id, (tokens, at) in self._buckets.items() if tokens + (now - at) * rate >= burst]
        for id in full:
            del self._buckets[id]
        for id in list(self._buckets)[: max(0, len(self._buckets) - self.max_buckets)]:
            del self._buckets[id]  # the least recently used: they had the longest to refill

    def __len__(self) -> int:
        return len(self._buckets)
