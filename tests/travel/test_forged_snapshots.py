"""A snapshot is checked before it is trusted: a forged one is refused (keyed logs) or reported
(unkeyed logs), on every backend."""

from __future__ import annotations

import dataclasses
import zlib

import pytest

from eventlog import Snapshot, snapshot_store
from projections import Views, check_snapshots, default_views

from .forgery import FORGER, forge_approval_actors, forge_approval_history, record_rejection, store_snapshots

KEY = b"k" * 32


def decisions(views: Views) -> list[tuple[str, str]]:
    """The history's decisions and the live view of who decided: both must be the log's."""
    rows = [(r.decision, r.actor) for r in views.approval_history()]
    assert views.approval_actors("run-1") == [actor for _, actor in rows]
    return rows


@pytest.mark.parametrize("forge", [forge_approval_history, forge_approval_actors])
def test_a_forged_snapshot_of_an_unkeyed_log_fails_the_check(log, forge):
    record_rejection(log)
    store_snapshots(log)
    assert check_snapshots(log, default_views()).ok
    forged = forge(log)

    check = check_snapshots(log, default_views())
    assert check.method == "re-derived"
    assert not check.ok
    assert [(b.view, b.seq) for b in check.bad] == [(forged.name, forged.seq)]
    assert "differs from what the log folds to" in check.bad[0].reason


def test_a_keyed_log_refuses_a_forged_snapshot_and_stores_it_anew(log_factory):
    log = log_factory(hmac_key=KEY)
    record_rejection(log)
    store_snapshots(log)
    assert all(s.mac for s in snapshot_store(log).list())  # sealed with the log's key
    assert check_snapshots(log, default_views()).to_dict()["method"] == "mac"
    forged = forge_approval_actors(log)

    check = check_snapshots(log, default_views())
    assert [(b.view, b.seq, b.reason) for b in check.bad] == [
        ("approval_actors", forged.seq, "its MAC does not match (forged, or sealed with another key)")
    ]
    views = Views(log)
    assert decisions(views) == [("reject", "alice")]  # the log's truth, not the forgery
    assert "approval_actors" not in views.runner.restored
    assert ("approval_actors", forged.version, forged.seq) in views.runner.rebuilt
    views.runner.flush()
    assert check_snapshots(log, default_views()).ok  # stored anew, sealed
    assert decisions(Views(log)) == [("reject", "alice")]


def test_a_keyed_log_refuses_an_unsealed_snapshot(log_factory):
    log = log_factory(hmac_key=KEY)
    record_rejection(log)
    store_snapshots(log)
    forged = forge_approval_actors(log)
    snapshot_store(log).put(dataclasses.replace(forged, mac=""))  # as code that did not seal wrote it
    views = Views(log)
    assert decisions(views) == [("reject", "alice")]
    assert "no MAC" in views.runner.rebuilt[(forged.name, forged.version, forged.seq)]


def test_a_snapshot_whose_content_does_not_match_its_digest_is_never_used(log):
    record_rejection(log)
    store_snapshots(log)
    store = snapshot_store(log)
    forged = forge_approval_actors(log)
    # The clumsy forger: new content, a digest that is not its own.
    store.put(Snapshot(forged.name, forged.version, forged.seq, forged.hash, "0" * 64, forged.size,
                       forged.data))  # fmt: skip
    views = Views(log, snapshots=store)
    assert decisions(views) == [("reject", "alice")]
    assert all(actor != FORGER for _, actor in decisions(views))
    faults = {**views.runner.rejected, **views.runner.rebuilt}
    assert faults[(forged.name, forged.version, forged.seq)] == "its content does not match its digest"


def test_a_snapshot_that_does_not_decompress_is_never_used(log):
    record_rejection(log)
    store_snapshots(log)
    store = snapshot_store(log)
    listed = store.list("approval_actors")[-1]
    store.put(Snapshot(listed.name, listed.version, listed.seq, listed.hash, listed.digest, 9,
                       b"x\x9cgarbage"))  # fmt: skip
    views = Views(log)
    assert decisions(views) == [("reject", "alice")]
    faults = {**views.runner.rejected, **views.runner.rebuilt}
    assert "does not decompress" in faults[(listed.name, listed.version, listed.seq)]
    assert zlib  # the data is zlib's framing with a corrupt body
