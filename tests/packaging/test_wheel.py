"""The wheel carries every module and the console's files: built, installed fresh, imported."""

import os
import pathlib
import site
import subprocess
import sys
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("eventlog", "projections", "actors", "tools")
# Every static file of the console, as the checkout has them.
CONSOLE_FILES = tuple(
    sorted(p.name for p in (ROOT / "tools" / "console").iterdir() if p.suffix in (".html", ".js", ".css"))
)

IMPORT_ALL = """
import importlib, pathlib, pkgutil, sys
prefix = pathlib.Path(sys.prefix).resolve()
for top in {packages!r}:
    package = importlib.import_module(top)
    for info in [None, *pkgutil.walk_packages(package.__path__, top + ".")]:
        if info and info.name.endswith(".__main__"):
            continue  # running it is `python -m`'s job; the CLI check below covers it
        module = importlib.import_module(info.name) if info else package
        where = pathlib.Path(module.__file__).resolve()
        assert prefix in where.parents, f"{{module.__name__}} was imported from {{where}}, not the wheel"
from importlib.resources import files
for name in {console!r}:
    assert files("tools").joinpath("console", name).read_bytes(), name
print("imported from the wheel")
"""


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_virtualenv(tmp_path):
    # Nothing of the checkout may be on the path (pip would take its metadata for an install).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True,
        timeout=300,
    )
    (wheel,) = wheels.glob("flightlog-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)],
        env=env,
        check=True,
        timeout=300,
    )
    # Dependencies come from this interpreter's site-packages, added after the venv's own (the
    # wheel's copy wins, and the check below proves every module was loaded from it).
    (pth,) = env_dir.glob("lib/python*/site-packages")
    dirs = [d for d in site.getsitepackages() if pathlib.Path(d).is_dir()]
    (pth / "_deps.pth").write_text(f"import site; list(map(site.addsitedir, {dirs!r}))\n")
    run = subprocess.run(
        [str(python), "-c", IMPORT_ALL.format(packages=PACKAGES, console=CONSOLE_FILES)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "imported from the wheel" in run.stdout
    cli = subprocess.run(
        [str(env_dir / "bin" / "flightlog"), "--help"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stderr
    assert "flightlog: a flight recorder" in cli.stdout
