"""Each package's __all__ is sorted and names exactly what the front door exports."""

import importlib

import pytest

PACKAGES = [
    "flightlog",
    "flightlog.integrations",
    "flightlog.integrations.langgraph",
    "flightlog.integrations.openai_agents",
    "eventlog",
    "projections",
    "actors",
    "actors.approvals",
    "actors.broker",
    "actors.controller",
    "actors.harnesses",
    "actors.sessions",
    "tools",
    "tools.bench",
    "tools.cli",
    "tools.demo",
    "tools.feeds",
    "tools.http",
]


def isort_key(name: str) -> tuple[int, str]:
    """Constants, then classes, then functions: the order ruff's RUF022 keeps."""
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_resolves(name):
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported == sorted(exported, key=isort_key), f"{name}.__all__ is not sorted"
    for member in exported:
        assert hasattr(module, member), f"{name}.__all__ names {member!r}, which is missing"


@pytest.mark.parametrize("name", PACKAGES)
def test_public_names_are_all_exported(name):
    module = importlib.import_module(name)
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and getattr(v, "__module__", "").startswith(name + ".")
        and not isinstance(v, type(importlib))
    }
    assert public <= set(module.__all__), (
        f"{name} exposes {sorted(public - set(module.__all__))} outside __all__"
    )
