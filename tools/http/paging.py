"""The cursor and page size of a paged list, as a request names them (`?after=&limit=`)."""

from __future__ import annotations

from typing import Any

from projections import LIST_PAGE, MAX_LIST_PAGE

from .wire import WireError

MAX_CURSOR = 2**62  # past any seq a log reaches: a larger one names no page


def page_query(params: Any, default: int = LIST_PAGE, most: int = MAX_LIST_PAGE) -> tuple[int | None, int]:
    """`after` (the `next` of a previous page; absent: from the start) and `limit` (default
    `default`, at most `most`: more is read as `most`). 400 for anything but whole numbers."""
    after, limit = params.get("after") or "", params.get("limit") or ""
    if after and not (after.isdigit() and int(after) <= MAX_CURSOR):
        raise WireError(400, "after must be the `next` cursor of a previous page (a whole number, a seq)")
    if limit and not (limit.isdigit() and int(limit) >= 1):
        raise WireError(400, f"limit must be a whole number from 1 (at most {most} are returned)")
    return (int(after) if after else None), (min(int(limit), most) if limit else default)
