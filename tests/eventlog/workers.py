"""Processes for the event log's multi-process tests: `python workers.py MODE DB ...`.

Every acknowledgement is one line on stdout, flushed as soon as `append` returned, so the
parent knows exactly which appends were acknowledged even when it kills this process.
"""

from __future__ import annotations

import faulthandler
import json
import sys
import threading
from collections.abc import Callable, Sequence

from eventlog import ConcurrencyError, EventLog, NewEvent, Record, open_log

_out = threading.Lock()


def ack(line: str) -> None:
    with _out:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def append_with_retry(log: EventLog, stream: str, events: Sequence[NewEvent]) -> tuple[list[Record], int]:
    """Read the stream's version, append expecting it, and start over when another writer won.

    Returns the records and how many times another writer won first.
    """
    retries = 0
    while True:
        version = log.stream_version(stream)
        try:
            return log.append(stream, events, expect=version), retries
        except ConcurrencyError:
            retries += 1


def contend(log: EventLog, writer: str, ops: int, shared: int, acked: Callable[[str], object]) -> int:
    """`ops` single-event appends, alternating between the writer's own stream and shared ones.

    Returns the number of retries after a ConcurrencyError.
    """
    retries = 0
    for i in range(ops):
        stream = f"own-{writer}" if i % 2 == 0 else f"shared-{i % shared}"
        event = NewEvent("Contended", {"writer": writer, "i": i})
        retries += append_with_retry(log, stream, [event])[1]
        acked(event.event_id)
    return retries


def run_contend(db: str, prefix: str, threads: int, ops: int, shared: int) -> None:
    # Seconds, not minutes, is normal: a hang prints every thread's stack and exits non-zero.
    faulthandler.dump_traceback_later(45, exit=True)
    with open_log(db) as log:
        workers = [
            threading.Thread(target=contend, args=(log, f"{prefix}_{t}", ops, shared, ack))
            for t in range(threads)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()


def run_crash(db: str, writer: str, batches: int) -> None:
    """Append batches of three until killed; ack `BATCH ID ID ID` after each commit."""
    with open_log(db) as log:
        own = f"crash-{writer}"
        version = log.stream_version(own)
        for n in range(batches):
            events = [NewEvent("Crashed", {"writer": writer, "batch": n, "k": k}) for k in range(3)]
            if n % 2 == 0:
                version = log.append(own, events, expect=version)[-1].version
            else:
                append_with_retry(log, "crash-shared", events)
            try:
                ack(" ".join([str(n), *(e.event_id for e in events)]))
            except BrokenPipeError:
                return


def run_append(db: str, stream: str, count: int) -> None:
    with open_log(db) as log:
        for i in range(count):
            log.append(stream, [NewEvent("Appended", {"i": i})])


def _kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise LookupError(field)


def run_memory(db: str) -> None:
    """Walk the log with read_all, follow and verify; print RSS figures as JSON (KiB)."""
    with open_log(db, readonly=True) as log:
        head = log.head()
        # Warm up every path once (imports, statement caches, the first page) before the baseline.
        for _ in zip(range(2000), log.read_all(), strict=False):
            pass
        log.verify(anchor=(1, next(log.read_all()).hash))
        baseline = _kib("VmRSS")
        counts = {}
        counts["read_all"] = sum(1 for _ in log.read_all())
        after_read = _kib("VmHWM")
        stop = threading.Event()
        n = 0
        for record in log.follow(stop=stop):
            n += 1
            if record.seq == head.seq:
                stop.set()
        counts["follow"] = n
        after_follow = _kib("VmHWM")
        result = log.verify(anchor=head)
        counts["verify"] = result.checked
        print(
            json.dumps(
                {
                    "baseline": baseline,
                    "after_read_all": after_read,
                    "after_follow": after_follow,
                    "peak": _kib("VmHWM"),
                    "counts": counts,
                    "verify_ok": result.ok,
                }
            )
        )


def main(argv: list[str]) -> None:
    mode, db, *rest = argv
    if mode == "contend":
        run_contend(db, rest[0], int(rest[1]), int(rest[2]), int(rest[3]))
    elif mode == "crash":
        run_crash(db, rest[0], int(rest[1]))
    elif mode == "append":
        run_append(db, rest[0], int(rest[1]))
    elif mode == "memory":
        run_memory(db)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
