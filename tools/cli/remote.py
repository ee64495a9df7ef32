"""`--server URL`: the commands that can read and decide through a running server's operator API.

The operator token comes from FLIGHTLOG_OPERATOR_TOKEN only (never argv, where `ps` shows it).
A server that cannot be reached, or that refuses the token, is a usage error (exit 2), as a
missing database file is; the answers are turned back into the rows the commands print on a
database file, so both modes print the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import click

from eventlog import CatalogueCheck, Finding, Head, VerifyResult
from projections import (
    LIST_PAGE,
    AgentRun,
    ApprovalRow,
    BadSnapshot,
    FinishStatus,
    RunMoment,
    RunRow,
    SnapshotCheck,
    TimelineEntry,
)
from projections.approvals import load_row

from .._integrity import Integrity
from ..http import entry_from_dict, moment_from_dict, runs_from_payload
from .serve import TOKEN_ENV

TIMEOUT = 60.0  # seconds; a verify of a large log takes a while
F = TypeVar("F", bound=Callable[..., Any])


def server_option(fn: F) -> F:
    """The `--server URL` option."""
    return click.option(
        "--server",
        metavar="URL",
        help=f"A running `flightlog serve` instead of DB (the token comes from ${TOKEN_ENV}).",
    )(fn)


def one_target(db: str | None, server: str | None, *more: str | None) -> tuple[str | None, ...]:
    """The positional arguments as meant: with --server the database is not given, so each
    argument moves one place left; exactly one of DB and --server must be there."""
    if server is None:
        if db is None:
            raise click.UsageError("give a database (DB) or --server URL")
        missing = [i for i, value in enumerate(more) if value is None]
        if missing:
            raise click.UsageError("missing an argument after DB (see --help)")
        return more
    values = [v for v in (db, *more) if v is not None]
    if len(values) > len(more):
        raise click.UsageError("give either DB or --server URL, not both")
    if len(values) < len(more):
        raise click.UsageError("missing an argument (see --help)")
    return tuple(values)


class OperatorClient:
    """Calls a running server's operator API with the operator token from the environment."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise click.BadParameter(f"not an http(s) URL: {url!r}", param_hint="--server")
        token = os.environ.get(TOKEN_ENV, "")
        if not token:
            raise click.UsageError(
                f"--server needs the operator token in the {TOKEN_ENV} environment variable"
            )
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def call(
        self, method: str, path: str, *, params: dict[str, str] | None = None, body: Any = None
    ) -> tuple[int, Any]:
        """(status, decoded JSON body) of one request; unreachable or unauthorized: a usage error."""
        import httpx  # here: every command that does not talk to a server starts without it

        try:
            with httpx.Client(timeout=TIMEOUT, headers=self._headers) as client:
                response = client.request(method, self.url + path, params=params, json=body)
        except httpx.HTTPError as e:
            raise click.UsageError(f"cannot reach the server at {self.url}: {e}") from e
        if response.status_code == 401:
            raise click.UsageError(f"the server at {self.url} refused the token in {TOKEN_ENV}")
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, {"error": response.text.strip()[:200]}

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        """The JSON of a GET that must succeed (any other status fails the command)."""
        status, body = self.call("GET", path, params=params)
        if status != 200:
            raise click.ClickException(f"{self.url}{path}: {status} {error_of(body)}")
        return body

    # -- reads -------------------------------------------------------------------------------

    def pages(self, path: str) -> Iterator[dict[str, Any]]:
        """The items of a paged list, page after page: each page's `next` is passed back as `after`."""
        after: Any = None
        while True:
            body = self.get(
                path, {"limit": str(LIST_PAGE), **({} if after is None else {"after": str(after)})}
            )
            yield from body["approvals"]
            after = body.get("next")
            if after is None:
                return

    def approval_history(self) -> list[ApprovalRow]:
        return [load_row(d) for d in self.pages("/api/v1/approvals/history")]

    def pending(self) -> list[ApprovalRow]:
        """The pending approvals, oldest request first (the seed leaves an empty run, tool call and
        quorum flag out of each: they are put back)."""
        empty = {"run_id": "", "tool_call_id": "", "requires_fleet_quorum": False}
        return [load_row({**empty, **d}) for d in self.pages("/api/v1/approvals")]

    def approval(self, approval_id: str) -> ApprovalRow | None:
        found = (load_row(d) for d in self.pages("/api/v1/approvals/history") if d["id"] == approval_id)
        return next(found, None)

    def integrity(self, anchor: Head | None = None) -> Integrity:
        """The server's verdict: its chain walked now, its records and snapshots as checked at its start."""
        body = self._verify_body(anchor)
        found = body.get("snapshots")
        check = None
        if isinstance(found, dict):
            bad = [BadSnapshot(str(b["view"]), int(b["version"]), int(b["seq"]), str(b["reason"]))
                   for b in found.get("bad", [])]  # fmt: skip
            check = SnapshotCheck(str(found["method"]), int(found["checked"]), bad)
        fits = body.get("catalogue")
        catalogue = None
        if isinstance(fits, dict):
            first = tuple(Finding(int(f["seq"]), str(f["stream"]), str(f["type"]), str(f["reason"]))
                          for f in fits.get("first", []))  # fmt: skip
            catalogue = CatalogueCheck(int(fits["checked"]), int(fits["off_catalogue"]), first)
        return Integrity(self._chain(body), check, catalogue)

    def verify(self, anchor: Head | None = None) -> VerifyResult:
        return self._chain(self._verify_body(anchor))

    def _verify_body(self, anchor: Head | None) -> dict[str, Any]:
        params = None if anchor is None else {"anchor_seq": str(anchor.seq), "anchor_hash": anchor.hash}
        status, body = self.call("GET", "/api/v1/verify", params=params)
        if status == 400:
            raise click.BadParameter(error_of(body), param_hint="--anchor")
        if status != 200:
            raise click.ClickException(f"{self.url}/api/v1/verify: {status} {error_of(body)}")
        return dict(body)

    @staticmethod
    def _chain(body: dict[str, Any]) -> VerifyResult:
        head = body.get("head")
        return VerifyResult(
            bool(body.get("chain_ok", body["ok"])), int(body["checked"]), body.get("first_bad_seq"),
            str(body.get("reason", "")),
            None if head is None else Head(int(head["seq"]), str(head["hash"])),
        )  # fmt: skip

    def runs(
        self, at: str | None
    ) -> tuple[list[RunRow], dict[str, FinishStatus | None], list[AgentRun], int, str | None]:
        """Broker runs, their finishes, agent runs, the seq and its time (ISO), as of `at`."""
        status, body = self.call("GET", "/api/v1/views/runs", params=_at(at))
        self._moment_errors(status, body, "/api/v1/views/runs")
        broker, finish, agent = runs_from_payload(body)
        return broker, finish, agent, int(body["seq"]), body.get("moment")

    def timeline(
        self, run_id: str, at: str | None, each: bool
    ) -> tuple[list[TimelineEntry], list[RunMoment], int, str | None]:
        """A run's entries as of `at` (or its moments), the seq and its time (ISO)."""
        path = f"/api/v1/runs/{quote(run_id, safe='')}/timeline"
        params = {"each": "1"} if each else _at(at)
        status, body = self.call("GET", path, params=params)
        if status == 404:
            raise click.UsageError(f"no run {run_id!r} on the server at {self.url}")
        self._moment_errors(status, body, path)
        if each:
            return [], [moment_from_dict(m) for m in body["moments"]], 0, None
        return [entry_from_dict(e) for e in body["entries"]], [], int(body["seq"]), body.get("moment")

    def _moment_errors(self, status: int, body: Any, path: str) -> None:
        if status == 400:
            message = error_of(body)
            raise click.BadParameter(message.removeprefix("at: "), param_hint="--at")
        if status != 200:
            raise click.ClickException(f"{self.url}{path}: {status} {error_of(body)}")


def _at(at: str | None) -> dict[str, str] | None:
    return None if at is None else {"at": at}


def error_of(body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return str(body["error"])
    return str(body)[:200]
