"""A process that rebuilds views: `python -m tests.travel.worker MODE DB [SEQ...]`.

Modes print one JSON line on stdout:
  zero     every view's digest at the head and at each SEQ, rebuilt from seq 0 (no snapshots)
  resume   the same, starting from whatever snapshots the log has; also which it used
  stall    rebuild storing snapshots every 100 seqs; at SEQ print {"stalled": SEQ} and block
           on stdin for ever (the parent kills the process there, mid-rebuild)
"""

from __future__ import annotations

import sys
from typing import Any

import orjson

from eventlog import Record, open_log
from projections import Views


def digests(views: Views, seqs: list[int]) -> dict[str, Any]:
    return {"head": views.digests(), "at": {str(seq): views.digests(at=seq) for seq in seqs}}


def main(argv: list[str]) -> None:
    mode, path, *rest = argv
    seqs = [int(s) for s in rest]
    log = open_log(path)
    out: dict[str, Any]
    if mode == "zero":
        views = Views(log, snapshots=None)
        views.catch_up()
        out = digests(views, seqs)
    elif mode == "resume":
        views = Views(log)
        views.catch_up()
        out = {**digests(views, seqs), "restored": views.runner.restored}
    elif mode == "stall":
        views = Views(log, snapshot_every=100)
        stall_at = seqs[0]

        def stall(record: Record) -> None:
            if record.seq == stall_at:
                views.runner.flush()  # the snapshots handed over so far are stored
                sys.stdout.write(orjson.dumps({"stalled": stall_at}).decode() + "\n")
                sys.stdout.flush()
                sys.stdin.read()  # blocks until the parent kills this process

        views.runner.add_listener(stall)
        views.catch_up()
        out = {"finished": True}  # only if stdin was closed instead
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    sys.stdout.write(orjson.dumps(out).decode() + "\n")
    sys.stdout.flush()
    log.close()


if __name__ == "__main__":
    main(sys.argv[1:])
