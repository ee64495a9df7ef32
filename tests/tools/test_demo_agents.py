"""The demo's agents: a message to a peer that has not registered yet waits for it, and the
demo stops at once, naming the agent, when one of its agent processes fails. Each agent
registers with the token of a run created for it, as the demo's (enrolled runs only)."""

from __future__ import annotations

import subprocess
import sys
import threading
import urllib.error

import click
import pytest

from actors import System, make_token, token_digest
from tools.demo import agent as demo_agent
from tools.demo import command as _demo
from tools.demo.background import BackgroundServer
from tools.http.app import create_app

WAIT = 30.0


@pytest.fixture
def system(tmp_path):
    with System.open(str(tmp_path / "demo.db"), scheduler=False) as opened:
        yield opened


@pytest.fixture
def server(system):
    # As `flightlog demo`'s: enrolled runs only, each created before its agent registers.
    with BackgroundServer(create_app(system, operator_token_sha256=token_digest(make_token()))) as background:
        yield background.url


class Watched(demo_agent.Client):
    """A client that says when the broker first answered 404 to it."""

    def __init__(self, url: str, run_id: str) -> None:
        super().__init__(url, run_id)
        self.refused = threading.Event()

    def authed(self, path, body=None, timeout=10.0):
        try:
            return super().authed(path, body, timeout)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                self.refused.set()
            raise


def test_a_message_to_a_peer_not_registered_yet_waits_for_it(server, system):
    sender = Watched(server, "deployer")
    sender.register(system.broker.create_run("deployer"))
    errors: list[BaseException] = []

    def send() -> None:
        try:
            demo_agent.send_when_registered(sender, "reviewer", {"message": "hello"})
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=send)
    thread.start()
    assert sender.refused.wait(WAIT), "the broker never refused the message to an unknown run"
    reviewer = demo_agent.Client(server, "reviewer")
    reviewer.register(system.broker.create_run("reviewer"))
    thread.join(WAIT)
    assert not thread.is_alive()
    assert errors == []
    [message] = reviewer.poll()
    assert message["type"] == "agent_message"
    assert message["payload"] == {"message": "hello"}


def test_a_message_to_a_peer_that_never_registers_fails_after_the_wait(server, system, monkeypatch):
    monkeypatch.setattr(demo_agent, "PEER_WAIT", 0.0)
    sender = demo_agent.Client(server, "deployer")
    sender.register(system.broker.create_run("deployer"))
    with pytest.raises(urllib.error.HTTPError) as caught:
        demo_agent.send_when_registered(sender, "nobody", {"message": "hello"})
    assert caught.value.code == 404
    caught.value.close()


def test_the_demo_stops_naming_an_agent_that_failed():
    failing = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], text=True)
    running = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, text=True
    )
    try:
        failing.wait(WAIT)
        agents = [_demo.Agent("deployer", failing), _demo.Agent("reviewer", running)]
        with pytest.raises(click.ClickException, match=r"demo agent failed: deployer \(exit 3\)"):
            _demo._finished(agents, controller=None)  # type: ignore[arg-type]
    finally:
        running.communicate("", timeout=WAIT)
