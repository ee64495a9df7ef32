"""How the CLI writes times, durations, latencies and digests, and tables that fit the terminal."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import click
import orjson
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from eventlog import Unreadable

from .._output import console, err_console, shown

SHORT_DIGEST = 12  # hex characters of a payload digest shown in tables


def say_unreadable(unreadable: Unreadable) -> None:
    """One line on stderr when the views left records out (they do not fit the event catalogue,
    or could not be folded): how many and the first few; nothing when none were."""
    summary = unreadable.summary()
    if summary:
        err_console.print(f"flightlog: {shown(summary)} (`flightlog verify` names them)", soft_wrap=True)


def when(at: datetime | None) -> str:
    if at is None:
        return "—"
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(seconds: float) -> str:
    """`1h 02m`, `4m 07s`, `12s`; `expired` once the time is up."""
    if seconds <= 0:
        return "expired"
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{max(s, 1)}s"


def latency(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


# -- payloads as JSON ------------------------------------------------------------------------


def readable_text(text: str) -> str:
    """`text`, or when it is the JSON text of an object or array (a broker payload), that JSON
    in its compact form, so a payload reads as JSON and not as JSON quoted inside a string."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return text
    try:
        return orjson.dumps(orjson.loads(stripped)).decode()
    except orjson.JSONDecodeError:
        return text


def readable_data(data: Any) -> Any:
    """A record's data for people: a string member that holds an object's or array's JSON text
    (the wire keeps a payload as the text it was sent as) becomes that value."""
    if not isinstance(data, dict):
        return data
    out = {}
    for key, value in data.items():
        if isinstance(value, str) and value.strip()[:1] in ("{", "["):
            with contextlib.suppress(orjson.JSONDecodeError):
                value = orjson.loads(value)
        out[key] = value
    return out


# -- tables that fit -------------------------------------------------------------------------

ID_PREFIX = 8  # characters of an id shown when the terminal is narrow (any unique prefix is accepted)
MIN_WRAPPED = 16  # the least width a wrapping column (a title) is squeezed to before columns drop


wide_option = click.option(
    "--wide", is_flag=True, help="Every column, whole, however wide (by default the table fits the terminal)."
)


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: `key` columns identify a row and never drop; `short` ones (ids) show a
    prefix when the terminal is narrow; `wraps` ones (titles) take what width is left."""

    name: str
    justify: str = "left"
    key: bool = False
    short: bool = False
    wraps: bool = False


def print_table(title: str, columns: list[Column], rows: list[list[str]], *, wide: bool = False) -> None:
    """Print rows (cells in rich markup) to fit the terminal, or as plain lines when piped.

    Piped (stdout not a terminal): a `# title` line, then the header and every row as
    tab-separated plain text, nothing truncated. On a terminal: a table as wide as the
    terminal; the identifying columns stay whole (ids shortened to a prefix), a title wraps,
    and the columns that do not fit are dropped with a hint that `--wide` or `--json` shows
    them. `wide`: every column, whole, however wide the table.
    """
    plain = [[_plain(c) for c in row] for row in rows]
    if not console.is_terminal:
        lines = [f"# {_plain(title)}", "\t".join(c.name for c in columns)]
        lines += ["\t".join(c.replace("\t", " ").replace("\n", " ") for c in row) for row in plain]
        click.echo("\n".join(lines))
        return
    natural = [max([len(c.name)] + [len(r[i]) for r in plain]) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))
    widths = list(natural)
    if not wide:
        shown, widths = _fit(columns, natural, console.width)
    table = Table(title=title, title_justify="left")
    for i in shown:
        c = columns[i]
        table.add_column(
            c.name, justify=c.justify, no_wrap=not c.wraps, overflow="fold" if c.wraps else "ellipsis",  # type: ignore[arg-type]
            min_width=min(natural[i], MIN_WRAPPED) if c.wraps else None,
        )  # fmt: skip
    for row in rows:
        table.add_row(*[_prefix(row[i], widths[i]) if columns[i].short else row[i] for i in shown])
    if wide:
        console.print(table, width=max(_total(natural), console.width), crop=False)
        return
    console.print(table)
    hidden = [columns[i].name for i in range(len(columns)) if i not in shown]
    if hidden:
        names = ", ".join(hidden)
        console.print(f"[dim]--wide or --json shows all: {len(hidden)} more column(s) ({names})[/]")


def _fit(columns: list[Column], natural: list[int], width: int) -> tuple[list[int], list[int]]:
    """The columns shown and their widths: short ids first, then the rightmost non-key columns drop."""
    widths = list(natural)
    shown = list(range(len(columns)))

    def need() -> int:
        return _total([min(widths[i], MIN_WRAPPED) if columns[i].wraps else widths[i] for i in shown])

    if _total([widths[i] for i in shown]) <= width:
        return shown, widths
    for i, c in enumerate(columns):
        if c.short:
            widths[i] = min(widths[i], max(ID_PREFIX, len(c.name)))
    for i in reversed(range(len(columns))):
        if need() <= width:
            break
        if not columns[i].key:
            shown.remove(i)
    return shown, widths


def _total(widths: list[int]) -> int:
    return 1 + sum(w + 3 for w in widths)  # a rich table's borders and padding


def _prefix(cell: str, width: int) -> str:
    text = _plain(cell)
    return cell if len(text) <= width else escape(text[:width])


def _plain(cell: str) -> str:
    return Text.from_markup(cell).plain
