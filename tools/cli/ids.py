"""Ids on the command line: a whole id, or a unique prefix of at least MIN_PREFIX characters."""

from __future__ import annotations

from collections.abc import Iterable

from projections import Views

from .._output import UsageFailure

MIN_PREFIX = 6
SHOWN = 10  # matches listed when a prefix is ambiguous


def resolve(given: str, known: Iterable[str], what: str) -> str:
    """The id `given` names among `known`: itself if whole (or unknown), else the one id it starts.

    An ambiguous prefix is a usage error listing the ids it matches; a prefix shorter than
    MIN_PREFIX is taken as a whole id (and so is not found).
    """
    ids = set(known)
    if given in ids or len(given) < MIN_PREFIX:
        return given
    matches = sorted(i for i in ids if i.startswith(given))
    if len(matches) == 1:
        return matches[0]
    if matches:
        listed = ", ".join(matches[:SHOWN]) + (f", … ({len(matches)} in all)" if len(matches) > SHOWN else "")
        raise UsageFailure(f"{given!r} is the start of more than one {what} id: {listed}; give more of it")
    return given


def run_id(views: Views, given: str) -> str:
    """A broker or agent run's id from a whole id or a unique prefix."""
    known = [r.run_id for r in views.agent_runs()] + [r.run_id for r in views.runs()]
    return resolve(given, known, "run")


def approval_id(views: Views, given: str) -> str:
    """An approval's id from a whole id or a unique prefix."""
    return resolve(given, (r.id for r in views.approval_history()), "approval")
