"""Shared CLI output helpers: JSON for scripts, rich tables for people, typed exits."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

import click
import orjson
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderableType, RenderHook
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.segment import Segment
from rich.table import Table

from eventlog import EventLog, EventLogError, Head, open_log

# Characters a terminal may act on rather than show: C0 (ESC, BEL, CR, BS, ... and newline),
# DEL, C1 (a lone U+009B is a CSI to some terminals), and the bidi and line-separator marks
# that make a line read other than it is.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROLS_BUT_NEWLINE = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def clean(text: object, *, keep_newlines: bool = False) -> str:
    """`text` with every control character written out visibly (ESC as `\\x1b`, U+202E as `\\u202e`).

    Text from runs (ids, titles, payload previews, event data) is data: on a terminal it must
    not set the title, clear the screen, move the cursor or fake a line. `keep_newlines`
    is for text the CLI itself lays out in lines (an error message).
    """
    pattern = _CONTROLS_BUT_NEWLINE if keep_newlines else _CONTROLS
    return pattern.sub(_written_out, str(text))


def shown(text: object) -> str:
    """`text` cleaned and with its rich markup escaped: the form of run data in a table or line."""
    return escape(clean(text))


def _written_out(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class _Inert:
    """A renderable whose text segments carry no control character but the newlines rich lays out."""

    def __init__(self, inner: RenderableType) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        for segment in console.render(self.inner, options):
            if segment.control or not _CONTROLS_BUT_NEWLINE.search(segment.text):
                yield segment
            else:
                text = _CONTROLS_BUT_NEWLINE.sub(_written_out, segment.text)
                yield Segment(text, segment.style)


class _InertOutput(RenderHook):
    """The backstop behind `shown`: nothing the CLI prints reaches the terminal as a control code."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Inert(r) for r in renderables]


def _console(**options: Any) -> Console:
    out = Console(highlight=False, **options)
    out.push_render_hook(_InertOutput())
    return out


console = _console()
err_console = _console(stderr=True)

EXIT_OK = 0
EXIT_FOUND = 1  # the check ran and found a problem (verify, replay-check)
EXIT_USAGE = 2


def emit_json(value: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n")
    sys.stdout.flush()


def open_db(path: str, *, readonly: bool = False) -> EventLog:
    """Open a database named on the command line, turning failures into a usage error."""
    if not path.startswith(("postgresql://", "postgres://", ":memory:")):
        import os

        if not os.path.exists(path):
            raise click.UsageError(f"no database at {path!r}")
    try:
        return open_log(path, readonly=readonly)
    except EventLogError as e:
        raise click.ClickException(str(e)) from e


def parse_anchor(text: str) -> Head:
    """An anchor as printed by `flightlog anchor`: `SEQ HASH` (or JSON {"seq", "hash"})."""
    text = text.strip()
    try:
        if text.startswith("{"):
            obj = orjson.loads(text)
            return Head(int(obj["seq"]), str(obj["hash"]))
        seq, h = text.split()
        return Head(int(seq), h)
    except (ValueError, KeyError, orjson.JSONDecodeError) as e:
        raise click.BadParameter(f"not an anchor (expected 'SEQ HASH'): {text[:80]!r}") from e


T = TypeVar("T")


# `--dir` of the bench commands: where their temporary databases go.
temp_dir_option = click.option(
    "--dir",
    "parent",
    type=click.Path(file_okay=False, exists=True),
    help="Where the temporary databases go (default: the system's temporary folder).",
)


def progress(description: str = "{task.description}", *, disable: bool = False) -> Progress:
    """A transient progress bar on stderr: the description, the bar, done of total, time elapsed."""
    return Progress(
        TextColumn(description),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=disable,
    )


def with_status(label: str, work: Callable[[Callable[[str], object]], T]) -> T:
    """Run `work(update)`, showing its progress line on a terminal's stderr (silently elsewhere)."""
    if err_console.is_terminal:
        with err_console.status(label) as status:
            return work(status.update)
    return work(lambda what: None)


def targets_table(targets: Iterable[Mapping[str, Any]], *, at_most_unit: str = "") -> Table:
    """A rich table of benchmark targets: label, value, target and PASS/MISS.

    Each target has `label`, `value`, `target`, `pass` and `at_most` (a ceiling, shown with
    `at_most_unit`, rather than a floor).
    """
    table = Table(title="targets")
    for name, justify in (("figure", "left"), ("value", "right"), ("target", "right"), ("", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for t in targets:
        verdict = "[green]PASS[/]" if t["pass"] else "[red]MISS[/]"
        if t["at_most"]:
            value, target = f"{t['value']:.2f}{at_most_unit}", f"≤ {t['target']:g}{at_most_unit}"
        else:
            value, target = f"{t['value']:,.0f}", f"≥ {t['target']:,.0f}"
        table.add_row(t["label"], value, target, verdict)
    return table
