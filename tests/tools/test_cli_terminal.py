"""Text from runs is data: no CLI table or line hands a terminal a control character.

A log may hold run ids and titles a run chose (written before `/register` refused them, or
through the Python API, or imported). Printed raw they set the operator's terminal title,
clear the screen or fake lines; the CLI writes every control character out instead.
"""

from __future__ import annotations

import re

import pytest

from actors import ApprovalRequest, Report, System
from tools._output import clean, shown

from .helpers import run

# The run id of the issue: set the title, ring, clear the screen, then fake a line.
EVIL = "esc\u001b]0;PWNED\u0007\u001b[2J\u2026\r\nfake-line"
# Everything but the CLI's own newlines and the tabs between the columns of piped output (a tab
# in run data is written out as `\x09`, like every other control character).
TERMINAL_ACTS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]")


@pytest.fixture
def evil_db(tmp_path):
    path = tmp_path / "evil.db"
    with System.open(path, scheduler=False) as system:
        system.broker.create_run(EVIL)  # the Python API trusts its caller: the CLI must not
        system.broker.report(Report(EVIL, f"state {EVIL}", '{"note": "\\u001b[31m"}'))
        approval = system.approvals.submit(
            ApprovalRequest(kind="shell", title=f"Run: {EVIL}", detail=EVIL, risk="high", run_id=EVIL)
        )
        system.approvals.refuse_attempt(approval.id, "approve", f"run:{EVIL}", f"it asked {EVIL}")
        system.approvals.resolve(approval.id, "reject", "alice\u001b[8m")
    return str(path)


@pytest.mark.parametrize(
    "args",
    [("runs",), ("events",), ("audit",), ("approvals", "--all"), ("events", "--stream", f"run-{EVIL}")],
    ids=" ".join,
)
def test_run_data_reaches_the_terminal_inert(evil_db, args):
    result = run(args[0], evil_db, *args[1:])
    assert result.exit_code == 0, result.output
    assert not TERMINAL_ACTS.search(result.output), repr(result.output)
    assert "\x1b" not in result.output
    assert "\x07" not in result.output
    assert "\r" not in result.output
    # The run's own newline is written out, so no line of output starts with its fake line.
    assert not any(line.lstrip("│ ").startswith("fake-line") for line in result.output.splitlines())
    assert "\\x1b" in result.output  # and the operator sees that something odd is there


def test_audit_shows_an_agent_reported_answer_apart_from_decisions(evil_db):
    result = run("audit", evil_db)
    assert "agent-reported answer refused at seq" in result.output
    assert "alice\\x1b[8m" in result.output


def test_clean_writes_out_every_control_character():
    assert clean("a\x1b[2J\x07\r\n\t\x00\x7f\x9b\u202e\u2028b") == (
        "a\\x1b[2J\\x07\\x0d\\x0a\\x09\\x00\\x7f\\x9b\\u202e\\u2028b"
    )
    assert clean("line\nnext\r", keep_newlines=True) == "line\nnext\\x0d"
    assert clean("plain, é and ☃") == "plain, é and ☃"
    assert shown("[bold]x\x1b") == "\\[bold]x\\x1b"
