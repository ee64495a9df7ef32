"""The OpenTelemetry feed: a follower of the log that streams finished spans to a collector.

Two threads of its own, so it never slows a write. The follower reads the log from a durable
cursor and folds it (`projections.traces`); each span a record ends goes on a bounded queue,
and when the queue is full (a slow or absent collector) the span is dropped and counted, not
waited for. The sender drains the queue in batches and, after each, saves the cursor with the
fold's state as of the last record it covers; so a restart resumes there, and spans sent
again after a crash carry the same ids. A new feed first folds the log up to its head without
sending, so runs already in flight are known; it sends what ends from then on (past runs go
through `flightlog export --otlp`).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading

import orjson

from eventlog import Cursor, EventLog, EventLogError, cursor_store
from projections.traces import Span, TraceFold

from .otlp import OtlpSender

CURSOR = "otel"
QUEUE_SIZE = 2048  # items (a record's spans and perhaps the fold's state) waiting to be sent
BATCH = 512  # spans per export request
STATE_EVERY = 256  # records between two saves of the fold's state when none ends a span

log_ = logging.getLogger("flightlog.otel")

_Item = tuple[int, list[Span], bytes | None]


class OtelFeed:
    """Streams the log's spans to one OTLP/HTTP collector; `close` stops both threads."""

    def __init__(self, log: EventLog, sender: OtlpSender, *, queue_size: int = QUEUE_SIZE) -> None:
        self.log, self.sender = log, sender
        self._queue: queue.Queue[_Item | None] = queue.Queue(queue_size)
        self._stop = threading.Event()
        self._follower = threading.Thread(target=self._follow, name="flightlog-otel-follow", daemon=True)
        self._sender = threading.Thread(target=self._send, name="flightlog-otel-send", daemon=True)
        self._fold, self._after = TraceFold(), 0
        self.sent = 0
        self.dropped = 0
        self.failed = 0

    def start(self) -> OtelFeed:
        """Load the cursor (or, on a first start, fold up to the head), then start the threads."""
        store = cursor_store(self.log)
        saved = store.get(CURSOR)
        if saved is None:
            self._fold, self._after = TraceFold(), self.log.head().seq
            for record in self.log.read_all(to_seq=self._after):
                self._fold.apply(record)
            store.put(Cursor(CURSOR, self._after, orjson.dumps(self._fold.dump())))
        else:
            self._fold, self._after = TraceFold(orjson.loads(saved.state)), saved.seq
        self._follower.start()
        self._sender.start()
        return self

    def close(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._follower.is_alive():
            self._follower.join(timeout)
        with contextlib.suppress(queue.Full):  # the sender sends what is queued, then ends
            self._queue.put(None, timeout=timeout)
        if self._sender.is_alive():
            self._sender.join(timeout)
        self.sender.close()

    def _follow(self) -> None:
        fold, after = self._fold, self._after
        try:
            passed = 0
            for record in self.log.follow(after, stop=self._stop):
                spans = fold.apply(record)
                passed += 1
                state = None
                if spans or passed >= STATE_EVERY:
                    state, passed = orjson.dumps(fold.dump()), 0
                    self._offer((record.seq, spans, state))
        except EventLogError as e:
            if not self.log.closed:
                log_.warning("flightlog: the OpenTelemetry feed stopped: %s", e)

    def _offer(self, item: _Item) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += len(item[1])

    def _send(self) -> None:
        store = cursor_store(self.log)
        done = False
        while not done:
            item = self._queue.get()
            batch: list[_Item] = []
            while item is not None:
                batch.append(item)
                if sum(len(i[1]) for i in batch) >= BATCH:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            done = item is None
            spans = [s for _, ss, _ in batch for s in ss]
            try:
                ok = self.sender.send(spans)
            except Exception as e:  # noqa: BLE001 - the exporter's own failure must not end the feed
                log_.warning("flightlog: OpenTelemetry export failed: %s", e)
                ok = False
            if ok:
                self.sent += len(spans)
            else:
                self.failed += len(spans)
            saved = [i for i in batch if i[2] is not None]
            if saved:
                seq, _, state = saved[-1]
                try:
                    store.put(Cursor(CURSOR, seq, state or b""))
                except EventLogError as e:
                    log_.warning("flightlog: the OpenTelemetry cursor was not saved: %s", e)
