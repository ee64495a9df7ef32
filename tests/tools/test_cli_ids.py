"""A unique prefix (6 characters or more) is accepted wherever an id is; an ambiguous one is refused."""

from __future__ import annotations

import pytest

from tools._output import UsageFailure
from tools.cli.ids import resolve

from .helpers import json_of, run, seed_approval

KNOWN = ["abcdef01-aaaa", "abcdef02-bbbb", "123456-x"]


def test_resolve_whole_prefix_unknown_and_ambiguous():
    assert resolve("123456-x", KNOWN, "run") == "123456-x"
    assert resolve("abcdef01", KNOWN, "run") == "abcdef01-aaaa"
    assert resolve("abcde", KNOWN, "run") == "abcde"  # too short to be a prefix: not found later
    assert resolve("ffffff", KNOWN, "run") == "ffffff"
    with pytest.raises(UsageFailure) as e:
        resolve("abcdef", KNOWN, "run")
    assert "abcdef01-aaaa, abcdef02-bbbb" in e.value.message


def test_approve_takes_a_prefix(db):
    id = seed_approval(db)
    result = run("approve", db, id[:8], "--as", "alice", "--json")
    assert result.exit_code == 0, result.output
    assert json_of(result)["id"] == id


def test_timeline_travel_and_diff_take_a_prefix(db, workload):
    _, seeded = workload
    prefix = seeded.run[:8]
    whole = json_of(run("timeline", db, seeded.run, "--json"))
    assert json_of(run("timeline", db, prefix, "--json")) == whole
    travelled = json_of(run("travel", db, prefix, "--at", "150", "--json"))
    assert travelled["run_id"] == seeded.run
    assert run("diff", db, prefix, "--from", "1", "--to", "150").exit_code in (0, 1)


def test_an_ambiguous_prefix_lists_the_matches(db):
    a = seed_approval(db, id="5eed00aa-0000-4000-8000-000000000001")
    b = seed_approval(db, id="5eed00ab-0000-4000-8000-000000000002")
    result = run("approve", db, "5eed00", "--as", "alice")
    assert result.exit_code == 2
    assert f"{a}, {b}" in result.stderr
    assert run("approve", db, "5eed00ab", "--as", "alice").exit_code == 0
