"""The demo's third agent: a plain Python program that reaches flightlog through the SDK.

It is what an agent developer writes (`import flightlog`, a run, a report, a gate) and stands
beside the two agents that speak avenor's wire protocol. The demo hands it its run's token in
FLIGHTLOG_RUN_TOKEN, as an orchestrator would; the operator's decision comes back on the gate.
"""

from __future__ import annotations

import os
import signal
import sys

signal.signal(signal.SIGINT, signal.SIG_DFL)  # the demo ends us; no traceback on Ctrl-C

import flightlog


def main() -> int:
    run_id = sys.argv[1] if len(sys.argv) > 1 else "tester"
    with flightlog.Client(os.environ["FLIGHTLOG_URL"]).run(run_id) as run:
        run.report("tests", {"suite": "unit", "passed": 42, "failed": 0})
        decision = run.gate("bash", {"cmd": "make integration-test"}, timeout=600)
        run.report("integration", {"allowed": decision.allowed, "decided_by": decision.decided_by})
        print(f"{run_id}: integration tests {decision.outcome} by {decision.decided_by or 'nobody'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
