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


# -- inside a layer: concept subpackages ------------------------------------------------------

# Within a layer, a subpackage may import the shell (the layer's top-level modules) and the
# subpackages ranked below it, only through their front doors; never a sibling of equal rank.
RANKS = {
    "actors": {"harnesses": 0, "approvals": 1, "broker": 2, "controller": 2, "sessions": 2},
    "tools": {"http": 0, "feeds": 0, "bench": 1, "demo": 1, "cli": 2},
}


def module_of(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: pathlib.Path, known: set[str]) -> set[str]:
    """Our modules a file imports: `from X import y` names X.y if that is a module, else X."""
    name = module_of(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    return found & known


def all_modules() -> dict[str, pathlib.Path]:
    return {module_of(p): p for package in OURS for p in sorted((ROOT / package).rglob("*.py"))}


def concept_of(module: str) -> tuple[str, str | None]:
    parts = module.split(".")
    layer = parts[0]
    sub = parts[1] if len(parts) > 1 and parts[1] in RANKS.get(layer, {}) else None
    return layer, sub


@pytest.mark.parametrize("layer", sorted(RANKS))
def test_concepts_import_downwards_through_front_doors(layer):
    modules = all_modules()
    for name, path in modules.items():
        own_layer, own = concept_of(name)
        if own_layer != layer:
            continue
        for target in imported_modules(path, set(modules)):
            t_layer, t_sub = concept_of(target)
            if t_layer != layer or t_sub is None or t_sub == own:
                continue
            where = f"{path.relative_to(ROOT)} imports {target}"
            assert target == f"{layer}.{t_sub}", f"{where}: use the front door {layer}.{t_sub}"
            if own is not None:
                assert RANKS[layer][t_sub] < RANKS[layer][own], f"{where}, which is not below {own}"


def test_front_doors_say_what_they_may_import():
    for layer, subs in RANKS.items():
        for sub in subs:
            text = (ROOT / layer / sub / "__init__.py").read_text()
            assert text.startswith('"""'), f"{layer}.{sub} opens with a one-line docstring"
            assert "Layering:" in text, f"{layer}.{sub} says what it may import"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("layer", ["actors", "eventlog", "projections", "tools"])
def test_no_import_circle_between_files(layer):
    modules = all_modules()
    # A package's __init__ is not an import of its submodules' parent: edges are what is named.
    graph = {m: imported_modules(p, set(modules)) - {m} for m, p in modules.items()}
    mine = [c for c in cycles(graph) if any(m.split(".")[0] == layer for m in c)]
    assert not mine, f"import circles: {mine}"


def test_cycle_finder_finds_a_circle():
    # Guards the guard: a finder that never reports would make the test above vacuous.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
