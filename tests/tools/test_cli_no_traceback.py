"""What a newcomer trips on first ends in one line and a documented exit code, never a traceback.

Each case runs `flightlog` as a real process (as a user's shell would), so what is checked is
the exit status and the whole stderr, not what click's test runner catches.
"""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys

from tests.tools.conftest import Seeded

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "100"}


def flightlog(*args: str, cwd: pathlib.Path, prelude: str = "") -> subprocess.CompletedProcess[str]:
    """`flightlog ARGS`; `prelude` is Python run first in the same process (to hide a module)."""
    main = "import sys\nfrom tools.cli import cli\nsys.exit(cli(sys.argv[1:], prog_name='flightlog'))"
    code = f"{prelude}\n{main}"
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120
    )


def no_traceback(proc: subprocess.CompletedProcess[str] | tuple[str, str]) -> str:
    out, err = (proc.stdout, proc.stderr) if isinstance(proc, subprocess.CompletedProcess) else proc
    assert "Traceback" not in err + out, err
    return err


def test_ctrl_c_ends_the_demo_and_its_agents_quietly_with_130(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", "demo", "--port", "0"],
        cwd=tmp_path,
        env={**ENV, "PYTHONFAULTHANDLER": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell gives a foreground job
        # SIGINT as a foreground job has it: a test run started in the background inherits it
        # ignored (a shell without job control ignores it for background jobs).
        preexec_fn=_default_sigint,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the agents are started before it waits for a person
            if "waiting for you" in line:
                break
        agents = _children(proc.pid)
        assert len(agents) >= 2, agents  # two broker agents and the controller's agent program
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            # Still running: faulthandler prints where every thread of it waits.
            os.kill(proc.pid, signal.SIGABRT)
            out, err = proc.communicate(timeout=30)
            raise AssertionError(f"the demo did not end on Ctrl-C; its threads:\n{err}") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):  # closed here whatever happened
            if pipe is not None:
                pipe.close()
    assert proc.returncode == 130, err
    no_traceback((out, err))
    assert "stopped" in err
    for pid in agents:  # no agent outlives the demo
        assert not pathlib.Path(f"/proc/{pid}").exists() or _zombie(pid), pid


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _children(pid: int) -> list[int]:
    found = []
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def _zombie(pid: int) -> bool:
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True


def test_a_busy_port_says_so_and_suggests_port_0(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        demo = flightlog("demo", "--auto", "--port", port, cwd=tmp_path)
        serve = flightlog("serve", "--db", str(tmp_path / "s.db"), "--port", port, cwd=tmp_path)
    for proc in (demo, serve):
        assert proc.returncode == 2, proc.stderr
        err = no_traceback(proc)
        assert f"port {port} on 127.0.0.1 is in use" in err
        assert "--port 0" in err


def test_a_run_id_given_as_a_stream_suggests_the_stream(workload: tuple[pathlib.Path, Seeded], tmp_path):
    path, seeded = workload
    proc = flightlog("events", str(path), "--stream", seeded.broker_run, cwd=tmp_path)
    assert proc.returncode == 2
    assert f"--stream run-{seeded.broker_run}" in no_traceback(proc)
    unknown = flightlog("events", str(path), "--stream", "nothing", cwd=tmp_path)
    assert unknown.returncode == 2
    assert "run-<id>" in no_traceback(unknown)


def test_a_missing_extra_names_the_extra_to_install(tmp_path):
    # `sys.modules[name] = None` is how Python marks a module that cannot be imported.
    proc = flightlog(
        "bench", "log", "--quick", cwd=tmp_path, prelude="import sys; sys.modules['eventsourcing'] = None"
    )
    assert proc.returncode == 2
    assert "pip install 'flightlog[bench]'" in no_traceback(proc)


def test_every_exit_code_is_in_the_help_and_the_cli_docs(tmp_path):
    from tools.cli import decide

    help_text = flightlog("--help", cwd=tmp_path).stdout
    readme = (ROOT / "docs" / "cli.md").read_text()
    codes = [0, 1, 2, decide.EXIT_UNKNOWN, decide.EXIT_DECIDED, decide.EXIT_EXPIRED]
    codes += [decide.EXIT_DUPLICATE_VOTE, decide.EXIT_RECORDING, 130]
    section = readme.split("Exit codes", 1)[1][:1500]
    for code in codes:
        assert f" {code} " in help_text or f"{code}  " in help_text, code
        assert f"`{code}`" in section, code


def test_redrive_checks_its_command_before_claiming_the_fork(db, workload, tmp_path):
    from .helpers import json_of, run

    _, seeded = workload
    fork = json_of(run("fork", db, seeded.run, "--at", "40", "--json"))["run_id"]
    proc = flightlog("redrive", db, fork[:8], "--command", "python3 no-such-agent.py", cwd=tmp_path)
    assert proc.returncode == 2
    err = no_traceback(proc)
    assert "no-such-agent.py" in err  # the program's own stderr
    assert "not re-driven" in err
    # The fork's one re-drive is still there to take.
    assert run("redrive", db, fork, "--apply-recorded", "--json").exit_code == 0
