"""The adapters' frameworks are imported by their own modules only, and their absence is said plainly."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import flightlog

FRAMEWORKS = ("langgraph", "langchain_core", "agents", "openai")
SDK = str(pathlib.Path(flightlog.__file__).parents[1])

# The frameworks are made unimportable, as on a machine without the extras.
PROBE = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {frameworks!r}:
            raise ImportError(f"{{name}} is not installed")
sys.meta_path.insert(0, Refuse())
sys.path.insert(0, {sdk!r})
import flightlog, flightlog.integrations, flightlog.integrations.checkpoints
try:
    import flightlog.integrations.{adapter}
except ImportError as e:
    print(e)
"""


def probe(adapter: str) -> str:
    code = PROBE.format(frameworks=FRAMEWORKS, sdk=SDK, adapter=adapter)
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_sdk_and_the_checkpoint_reader_import_without_any_framework():
    # The probe itself imports flightlog, flightlog.integrations and its checkpoints first:
    # a framework imported by any of them fails the probe before the adapter's own import.
    assert "pip install 'flightlog[langgraph]'" in probe("langgraph")


def test_an_adapter_without_its_framework_names_the_extra_to_install():
    assert "pip install 'flightlog[openai-agents]'" in probe("openai_agents")
