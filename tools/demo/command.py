"""`flightlog demo`: three agents for real, an operator console, and the audit trail they leave."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import click
from rich.table import Table

from actors import (
    APPROVE,
    CommandHarness,
    Controller,
    HarnessEvent,
    QuorumPendingError,
    System,
)
from actors import ApprovalError as _ApprovalError
from actors.operators import APPROVER, Credential

from .._output import EXIT_INTERRUPTED, UsageFailure, console, err_console
from .background import BackgroundServer
from .claim import claimed

POLICY = (
    "auto policy: approve the deployer's rollout command; reject any write under /etc; "
    "approve the quorum reconcile as two operators (alice, bob)"
)
TERMINAL = {"succeeded", "failed", "aborted"}
DEADLINE = 120.0  # seconds --auto waits for every run before it gives up
# The agent program, run as a file (stdlib only): it starts fast, and Ctrl-C ends it at once.
AGENT = str(Path(__file__).with_name("agent.py"))
SDK_AGENT = str(Path(__file__).with_name("sdk_agent.py"))


class DemoReconciler:
    """A reconciler for the demo: scaling a service is 'applied' by recording the evidence."""

    def prepare(self, intent: dict[str, Any]) -> dict[str, Any]:
        return {"service": intent.get("service"), "from_replicas": 2, "to_replicas": intent.get("replicas")}

    def reconcile_approved(self, intent: dict[str, Any], revision: dict[str, Any]) -> dict[str, Any]:
        return {
            "applied": True,
            "service": intent.get("service"),
            "replicas": intent.get("replicas"),
            "revision": revision,
        }


class ReconcilingHarness:
    """Wraps a CommandHarness: when the agent starts its approved `reconcile` tool call,
    dispatch it through the controller's one-time approval and report the evidence."""

    def __init__(self, inner: CommandHarness) -> None:
        self.inner = inner
        self.controller: Controller | None = None

    def start(self, publish: Any) -> str:
        def intercept(event: HarnessEvent) -> object:
            result = publish(event)
            if event.type == "tool.start" and event.data.get("tool_name") == "reconcile" and self.controller:
                call_id = str(event.data.get("tool_call_id", ""))
                evidence = self.controller.reconcile_approved(dict(event.data.get("arguments", {})), call_id)
                publish(
                    HarnessEvent(
                        "tool.complete",
                        event.run_id,
                        f"done-{call_id}",
                        {"tool_call_id": call_id, "evidence": evidence},
                    )
                )
            return result

        return self.inner.start(intercept)

    def send(self, run_id: str, prompt: str, delivery: str) -> None:
        self.inner.send(run_id, prompt, delivery)

    def abort(self, run_id: str) -> None:
        self.inner.abort(run_id)

    def close(self) -> None:
        self.inner.close()


def register(cli: click.Group) -> None:
    cli.add_command(demo_cmd)


@click.command("demo")
@click.option("--db", default="flightlog-demo.db", show_default=True, help="The demo database (recreated).")
@click.option(
    "--port",
    default=8765,
    show_default=True,
    envvar="FLIGHTLOG_DEMO_PORT",
    type=click.IntRange(0, 65535),
    help="0: any free port (also from $FLIGHTLOG_DEMO_PORT).",
)
@click.option("--auto", is_flag=True, help="Decide approvals by the stated policy, print the results, exit.")
@click.option(
    "--reset", is_flag=True, help="Replace the log DB holds with a new demo (without it, one is refused)."
)
@click.pass_context
def demo_cmd(ctx: click.Context, db: str, port: int, auto: bool, reset: bool) -> None:
    """Run three agents against a fresh database, with the operator console at /ui/.

    Two external agents talk to the broker over HTTP (register, report, ask permission,
    message each other, finish), and one controller session runs an agent program whose
    reconcile needs a quorum of two operators. Without --auto it waits for you in the console.

    \b
    Example:
      flightlog demo            # then open the printed URL and log in with the token
      flightlog demo --auto     # a one-minute tour that decides by policy and exits
    """
    path = Path(db)
    if path.is_dir():
        example = path / "flightlog-demo.db"
        raise UsageFailure(f"--db {db} is a folder; give the demo a file, such as {example}")
    if not path.parent.is_dir():
        raise UsageFailure(f"--db {db}: its folder {path.parent} does not exist")
    # The default port busy (another demo, say): take any free one and say so; a port asked for is kept.
    fallback = ctx.get_parameter_source("port") is click.core.ParameterSource.DEFAULT
    try:
        # Before anything is removed: the port, other users of the file, a log it holds.
        with claimed(path, 0 if fallback else port, reset=reset):
            _demo(path, port, auto, fallback=fallback)
    except OSError as e:  # removing the old file, or the log's folder: one line, no traceback
        raise UsageFailure(f"--db {db}: {e.strerror or e}") from None
    except KeyboardInterrupt:
        # The agents (in this process group) got the same SIGINT and end quietly too.
        err_console.print(f"stopped; the log so far is in {path} (flightlog audit {path})")
        raise SystemExit(EXIT_INTERRUPTED) from None


def _demo(path: Path, port: int, auto: bool, *, fallback: bool = False) -> None:
    from ..http import PortInUseError, create_app

    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with System.open(str(path), approval_timeout=600.0) as system:
        # Two named operators, each with their own token: a two-person approval needs both.
        operators = {name: system.operators.enrol(name, APPROVER, by="demo") for name in ("alice", "bob")}
        app = create_app(system, operator_token_sha256="")
        try:
            server = BackgroundServer(app, port=port).__enter__()
        except PortInUseError as e:
            if not fallback:
                raise UsageFailure(f"{e}: pass --port 0 for any free port, or another --port") from e
            server = BackgroundServer(app, port=0).__enter__()
            console.print(f"[yellow]port {port} is busy: took a free one instead ({server.url})[/]")
        agents: list[Agent] = []
        controller: Controller | None = None
        try:
            console.print(f"[bold]flightlog demo[/] on [cyan]{path}[/]")
            console.print(f"console:        {server.url}/ui/")
            for name, (_, token) in operators.items():
                console.print(f"{name}'s token:  {token}  (approver)")
            agents = _start_agents(system, server.url)
            controller = _start_controller(system)
            run_id = controller.send("Scale the web service to 3 replicas and tell me when it is done")
            if not auto:
                console.print("waiting for you: approve or reject in the console; Ctrl-C to stop")
                console.print(
                    "two-person approval: log in with alice's token and approve, then log in with "
                    "bob's (log out first, or use a private window) and approve as bob"
                )
                _wait_for_person(system, agents, controller)
            else:
                console.print(POLICY)
                _auto(system, agents, controller, {n: c for n, (c, _) in operators.items()})
            _report(system, run_id)
        finally:  # also when the demo fails or is interrupted: no agent process outlives it
            if controller is not None:
                controller.close()
            for agent in agents:
                if agent.proc.poll() is None:
                    agent.proc.terminate()
                agent.proc.wait(timeout=10)
            server.stop()
            # The -wal folded into the file: a plain copy of the database is whole.
            system.log.checkpoint()
        # After everything stopped: the count is the file's, closing events included.
        _verified(system)


class Agent(NamedTuple):
    run_id: str
    proc: subprocess.Popen[str]


def _start_agents(system: System, url: str) -> list[Agent]:
    """The agent processes, each handed the token of a run created for it beforehand: two that
    speak avenor's wire protocol, and one written with the Python SDK (`import flightlog`).

    The server takes enrolled runs only: the demo creates each run, as an orchestrator does
    through the operator API, and its agent registers with the token it was given.
    """
    procs = []
    for run_id, peer, role in (("deployer", "reviewer", "deployer"), ("reviewer", "deployer", "reviewer")):
        token = system.broker.create_run(run_id, by="demo")
        env = {**os.environ, "FLIGHTLOG_RUN_TOKEN": token}
        procs.append(
            Agent(
                run_id,
                subprocess.Popen(
                    [
                        sys.executable,
                        AGENT,
                        "--url",
                        url,
                        "--run-id",
                        run_id,
                        "--peer",
                        peer,
                        "--role",
                        role,
                    ],
                    env=env,
                    stdout=subprocess.PIPE,
                    text=True,
                    # Out of the terminal's reach: Ctrl-C stops the demo, which ends them.
                    start_new_session=True,
                ),
            )
        )
    token = system.broker.create_run("tester", by="demo")
    env = {**os.environ, "FLIGHTLOG_RUN_TOKEN": token, "FLIGHTLOG_URL": url}
    sdk_agent = subprocess.Popen(
        [sys.executable, SDK_AGENT, "tester"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    procs.append(Agent("tester", sdk_agent))
    return procs


def _start_controller(system: System) -> Controller:
    harness = ReconcilingHarness(CommandHarness([sys.executable, AGENT, "--harness"]))
    controller = system.controller(harness, reconciler=DemoReconciler(), controller_id="demo")
    harness.controller = controller
    controller.start()
    return controller


def _decide(system: System, decided: set[tuple[str, str]], operators: dict[str, Credential]) -> None:
    """Apply the stated policy to every pending approval, each vote with its operator's credential."""
    for approval in system.approvals.pending():
        if "/etc" in approval.detail or "/etc" in approval.title:
            voters, decision = ["alice"], "reject"
        elif approval.requires_fleet_quorum:
            voters, decision = ["alice", "bob"], APPROVE
        else:
            voters, decision = ["alice"], APPROVE
        for voter in voters:
            if (approval.id, voter) in decided:
                continue
            decided.add((approval.id, voter))
            try:
                identity = operators[voter].credential_id
                system.approvals.resolve(approval.id, decision, voter, identity=identity)
            except QuorumPendingError:
                continue  # the next operator's vote completes it
            except _ApprovalError as e:
                err_console.print(f"[yellow]{approval.title}: {e}[/]")


def _finished(agents: list[Agent], controller: Controller) -> bool:
    failed = [a for a in agents if a.proc.poll() not in (None, 0)]
    if failed:  # its peer would wait for it until the deadline: say so now
        names = ", ".join(f"{a.run_id} (exit {a.proc.returncode})" for a in failed)
        raise click.ClickException(f"demo agent failed: {names}; its error is printed above")
    return all(a.proc.poll() is not None for a in agents) and controller.run().status in TERMINAL


def _auto(
    system: System, agents: list[Agent], controller: Controller, operators: dict[str, Credential]
) -> None:
    woke = threading.Event()
    unsubscribe = system.approvals.subscribe(woke.set)
    signal, unsubscribe_ctrl = controller.subscribe()
    decided: set[tuple[str, str]] = set()
    start = time.monotonic()
    try:
        while not _finished(agents, controller):
            if time.monotonic() - start > DEADLINE:
                raise click.ClickException("the demo runs did not finish in time")
            _decide(system, decided, operators)
            woke.wait(0.2)  # new approvals wake us; agents exiting are seen on the next round
            woke.clear()
            signal.wait(0)
    finally:
        unsubscribe()
        unsubscribe_ctrl()
    for agent in agents:
        out = agent.proc.stdout.read() if agent.proc.stdout else ""
        if out.strip():
            console.print(f"[dim]{out.strip()}[/]")


def _wait_for_person(system: System, agents: list[Agent], controller: Controller) -> None:
    """Until Ctrl-C (KeyboardInterrupt, which ends the demo with exit 130)."""
    while True:
        if _finished(agents, controller):
            system.log.checkpoint()  # a copy of the file taken while the console waits is whole
            console.print("every run has finished; Ctrl-C to stop the server")
            threading.Event().wait()
        time.sleep(0.5)


def _report(system: System, run_id: str) -> None:
    system.views.catch_up()
    runs = Table(title="runs (broker)")
    for col in ("run", "last state", "reports", "finishes", "last seen"):
        runs.add_column(col)
    for row in system.views.runs():
        status = system.views.finish_status(row.run_id)
        runs.add_row(
            row.run_id,
            status.last_status if status and status.count else row.last_state,
            str(row.reports),
            str(row.finishes),
            row.last_seen.isoformat(timespec="seconds"),
        )
    console.print(runs)
    timeline = Table(title=f"timeline of controller run {run_id[:8]}")
    for col in ("kind", "who", "text / detail", "status"):
        timeline.add_column(col)
    for e in system.views.timeline(run_id):
        timeline.add_row(e.kind, e.name or e.role, (e.text or e.detail)[:70], e.status)
    console.print(timeline)
    audit = Table(title="approval audit trail")
    for col in ("title", "risk", "digest", "outcome", "by", "latency ms"):
        audit.add_column(col)
    for a in system.views.approval_history():
        latency = f"{a.latency_ms:.0f}" if a.latency_ms is not None else ""
        by = [*a.votes, *([a.actor] if a.actor and a.actor not in a.votes else [])]
        audit.add_row(a.title, a.risk, a.payload_sha256[:12], a.decision or a.status, ", ".join(by), latency)
    console.print(audit)


def _verified(system: System) -> None:
    result = system.log.verify()
    if result.ok:
        console.print(f"[green]verify: ok[/], chain verified over {result.checked} events")
    else:
        console.print(f"[red]verify: BROKEN at seq {result.first_bad_seq}: {result.reason}[/]")
        raise SystemExit(1)
