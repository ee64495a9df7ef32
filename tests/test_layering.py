"""The layers import only downwards: eventlog <- projections <- actors <- tools."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOWED = {
    "eventlog": set(),
    "projections": {"eventlog"},
    "actors": {"eventlog", "projections"},
    "tools": {"eventlog", "projections", "actors"},
}
OURS = set(ALLOWED)


def imported_packages(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & OURS


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_lower_layers(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package} has no modules"
    for path in files:
        bad = imported_packages(path) - ALLOWED[package] - {package}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}, above its layer"


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_front_door_states_the_rule(package):
    text = (ROOT / package / "__init__.py").read_text()
    assert text.startswith('"""'), "the front door opens with a one-line docstring"
    assert "Layering:" in text, "the front door says what the package may import"


def test_checker_catches_an_upward_import(tmp_path):
    # Guards the guard: without this, a broken AST walk would make the tests above vacuous.
    bad = tmp_path / "mod.py"
    bad.write_text("from actors import System\nimport tools.cli\n")
    assert imported_packages(bad) == {"actors", "tools"}
