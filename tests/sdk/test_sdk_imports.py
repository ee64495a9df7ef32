"""The SDK imports none of the server's layers: it installs and imports beside any agent."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import flightlog

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER_LAYERS = ("eventlog", "projections", "actors")
ALLOWED = {"httpx", "orjson", "flightlog"}
# An adapter imports its framework (the optional extra of its name installs it), in its module only.
FRAMEWORKS = {
    "flightlog/integrations/langgraph.py": {"langgraph", "langchain_core"},
    "flightlog/integrations/openai_agents.py": {"agents"},
}

# Run as an agent's script runs, its folder (holding its own `tools` package) first on the
# path, with the server's layers unimportable: the SDK importing one of them fails here.
PROBE = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {layers!r} or name.startswith("tools."):
            raise ImportError(f"the SDK imported {{name}}")
sys.meta_path.insert(0, Refuse())
sys.path[:0] = [{agent!r}, {sdk!r}]
import tools
assert tools.MINE, "the agent's own tools package"
import flightlog
assert flightlog.Client and flightlog.AsyncClient and flightlog.gate
assert sys.modules["tools"].MINE
print("ok")
"""


def test_flightlog_imports_beside_an_agent_with_its_own_tools_package(tmp_path):
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text("MINE = True\n")
    sdk = str(pathlib.Path(flightlog.__file__).parents[1])
    probe = PROBE.format(layers=SERVER_LAYERS, agent=str(tmp_path), sdk=sdk)
    # -I: no user site, no PYTHONPATH, the script's folder (here, the agent's) first.
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_no_sdk_module_imports_anything_but_httpx_orjson_and_the_stdlib():
    stdlib = set(sys.stdlib_module_names)
    for path in sorted((ROOT / "flightlog").rglob("*.py")):
        allowed = ALLOWED | FRAMEWORKS.get(path.relative_to(ROOT).as_posix(), set())
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top in allowed or top in stdlib, f"{path.relative_to(ROOT)} imports {name}"
