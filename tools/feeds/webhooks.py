"""The webhook feed: a follower of the log that POSTs each approval's notifications to one URL.

Its own thread reads the log from a durable cursor (`eventlog.cursor_store`, named after the
URL), so it never slows a write: when the receiver is slow or down it falls behind and
catches up. A delivery that fails (no connection, a timeout, 408, 429 or 5xx) is retried with
exponential backoff until it succeeds or the feed stops; the cursor moves past a record only
once its notification was delivered (or refused for good with another 4xx, logged). So a
restart resends at most the notification in flight: at-least-once, with the record's event id
as the idempotency key. A new feed starts at the log's head: it tells of what happens next.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable

from eventlog import Cursor, EventLog, EventLogError, cursor_store

from .notices import EVENT_HEADER, IDEMPOTENCY_HEADER, SIGNATURE_HEADER, body_of, notice, sign

log_ = logging.getLogger("flightlog.notify")
SAVE_EVERY = 1000  # records passed without a notification between two cursor saves
TYPES = frozenset({"ApprovalPublished", "ApprovalDecided"})


def cursor_name(url: str) -> str:
    return "notify:" + hashlib.sha256(url.encode()).hexdigest()[:16]


class WebhookFeed:
    """POSTs signed approval notifications to `url` from a thread of its own; `close` stops it."""

    def __init__(
        self,
        log: EventLog,
        url: str,
        key: bytes,
        base_url: str,
        *,
        backoff: float = 1.0,
        max_backoff: float = 300.0,
        timeout: float = 10.0,
        unix_time: Callable[[], int] | None = None,
    ) -> None:
        self.log, self.url, self.base_url = log, url, base_url
        self._key = key
        self._backoff, self._max_backoff = backoff, max_backoff
        import httpx  # here: commands that start no feed start without it

        self._client = httpx.Client(timeout=timeout)
        self._time = unix_time or (lambda: int(log.clock.now().timestamp()))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"flightlog-notify-{url}", daemon=True)
        self._after = 0
        self.delivered = 0
        self.refused = 0
        self.retries = 0

    def start(self) -> WebhookFeed:
        """Load the cursor (a first start begins at the head), then start the thread."""
        store, name = cursor_store(self.log), cursor_name(self.url)
        saved = store.get(name)
        self._after = saved.seq if saved is not None else self.log.head().seq
        if saved is None:
            store.put(Cursor(name, self._after))
        self._thread.start()
        return self

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._client.close()

    def _run(self) -> None:
        store, name = cursor_store(self.log), cursor_name(self.url)
        try:
            passed = 0
            for record in self.log.follow(self._after, stop=self._stop):
                passed += 1
                doc = notice(self.log, record, self.base_url) if record.type in TYPES else None
                if doc is not None and not self._deliver(doc, record.event_id):
                    return  # stopped while retrying: the cursor stays before this record
                if doc is not None or passed >= SAVE_EVERY:
                    store.put(Cursor(name, record.seq))
                    passed = 0
        except EventLogError as e:
            if not self.log.closed:
                log_.warning("flightlog: notifications to %s stopped: %s", self.url, e)

    def _deliver(self, doc: dict[str, object], key: str) -> bool:
        """POST until delivered or refused for good (True), or the feed stops (False)."""
        import httpx

        body = body_of(doc)
        delay = self._backoff
        while not self._stop.is_set():
            headers = {
                "Content-Type": "application/json",
                SIGNATURE_HEADER: sign(self._key, body, self._time()),
                IDEMPOTENCY_HEADER: key,
                EVENT_HEADER: str(doc["type"]),
            }
            try:
                status = self._client.post(self.url, content=body, headers=headers).status_code
            except httpx.HTTPError as e:
                status, why = 0, f"{type(e).__name__}: {e}"
            else:
                why = f"HTTP {status}"
            if 200 <= status < 300:
                self.delivered += 1
                return True
            if 400 <= status < 500 and status not in (408, 429):
                self.refused += 1
                log_.warning("flightlog: %s refused notification %s (%s); not retried", self.url, key, why)
                return True
            self.retries += 1
            if self._stop.wait(delay):
                break
            delay = min(delay * 2, self._max_backoff)
        return False
