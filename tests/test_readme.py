"""README.md's two commands work: the demo runs on a fresh folder, and CI runs the test command."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert block, "README.md has no bash block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_opens_with_exactly_the_two_commands():
    head = (ROOT / "README.md").read_text().split("## ", 1)[0]
    assert head.count("```bash") == 1, "the first lines hold one block with the two commands"
    install_demo, install_test = readme_commands()[:2]
    assert install_demo.startswith("pip install")
    assert install_demo.endswith("flightlog demo")
    assert install_test.startswith("pip install")
    assert install_test.endswith("pytest")


def test_ci_runs_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text()
    extracted = subprocess.run(
        ["bash", "-c", "awk '/^```bash/{b=1; next} /^```/{if(b) exit} b' README.md | sed -n 2p"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert extracted == readme_commands()[1]
    assert "test_cmd" in script
    assert "pytest" in extracted


def test_demo_auto_runs_on_a_fresh_folder(tmp_path):
    # The second half of the README's first command, as a new user would run it (with --auto
    # so it decides by its stated policy and exits instead of waiting for a person).
    demo = readme_commands()[0].split("&&", 1)[1].strip()
    assert demo == "flightlog demo"
    proc = subprocess.run(
        [sys.executable, "-m", "tools.cli", "demo", "--auto", "--port", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,  # more than the demo's own deadline, so its error is what fails
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "120", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "verify: ok" in proc.stdout
    assert "reject" in proc.stdout
    assert "approve" in proc.stdout
    assert (tmp_path / "flightlog-demo.db").exists()


def test_ci_runs_both_readme_commands_in_a_fresh_virtualenv():
    script = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv" in script
    assert 'source "$venv/bin/activate"' in script
    assert '"$(readme_cmd 1) --auto"' in script  # the demo, deciding by its policy
    assert 'run "$demo_cmd"' in script
    assert 'run "$test_cmd"' in script
    assert "constraints.txt" in script
    assert '"$status" -eq 5' in script  # no test collected is a failure, not a pass
