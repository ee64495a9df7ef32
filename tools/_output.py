"""Shared CLI output helpers: JSON for scripts, rich tables for people, typed exits."""

from __future__ import annotations

import importlib.util
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

from eventlog import EventLog, EventLogError, Head, StorageError, open_log

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
# 3-7: the refusals of `approve`/`reject` (tools/cli/decide.py)
# The database cannot be used: not a flightlog log, not a database, corrupt, unreadable, a
# directory, a full disk, read-only where a write was needed; a log file others can write (serve).
EXIT_STORAGE = 8
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT), as a shell reports it

# Every exit code of the CLI, for `flightlog --help` and docs/cli.md.
EXIT_CODES = """\b
Exit codes:
  0    ok
  1    a check found a problem (verify, audit, replay-check, diff found a change, an import refused)
  2    usage error: a missing database, a server that cannot be reached, a bad argument or id,
       a busy port, a missing extra, a weak operator token or an unsafe token file (serve)
  3-7  approve/reject refused: 3 no such approval, 4 already decided, 5 expired,
       6 a duplicate quorum vote, 7 still being recorded (see `flightlog approve --help`);
       3 also: serve refused a log whose chain does not verify or that holds records off
       the event catalogue (see --allow-tampered)
  8    the database cannot be used: not a flightlog log, not a database, damaged,
       unreadable, a directory, a full disk, read-only where a write was needed,
       a log file group or others can write (serve)
  9    serve --workers N: the workers could not start, or kept ending (their lines say why)
  130  interrupted (Ctrl-C)
"""


class UsageFailure(click.ClickException):
    """Raised for a usage error that needs no usage text: one line on stderr, exit 2."""

    exit_code = EXIT_USAGE


def require_extra(module: str, extra: str, what: str) -> None:
    """A UsageFailure naming the extra to install when `module` (from that extra) is missing."""
    if importlib.util.find_spec(module) is None:
        raise UsageFailure(f"{what} needs {module}, which is not installed: pip install 'flightlog[{extra}]'")


def storage_fault(exc: BaseException) -> StorageError | None:
    """The StorageError behind `exc`: itself, or the first one along its causes."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, StorageError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


class StorageFailure(click.ClickException):
    """A storage error as the CLI reports it: one line on stderr, exit EXIT_STORAGE."""

    exit_code = EXIT_STORAGE


class Commands(click.Group):
    """A click group whose commands turn any storage error into one line and EXIT_STORAGE."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort, click.UsageError, StorageFailure):
            raise
        except click.ClickException as e:  # a command's own message, over a storage error or not
            if storage_fault(e) is None:
                raise
            raise StorageFailure(e.message) from None
        except Exception as e:
            fault = storage_fault(e)
            if fault is None:
                raise
            raise StorageFailure(str(fault)) from None


def emit_json(value: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n")
    sys.stdout.flush()


def open_db(path: str, *, readonly: bool = False, existing_log: bool = False) -> EventLog:
    """Open a database named on the command line: a missing one is a usage error, one that
    cannot be used a StorageFailure.

    `readonly`: nothing is created, migrated or written (a file that is not a flightlog log
    is refused unchanged). `existing_log`: a writable open that still refuses, unchanged, a
    file that is not a flightlog log already.
    """
    is_file = not path.startswith(("postgresql://", "postgres://", ":memory:"))
    if is_file:
        import os

        if not os.path.exists(path):
            raise click.UsageError(f"no database at {path!r}")
    try:
        if existing_log and is_file and not readonly:
            open_log(path, readonly=True).close()  # refuses, unchanged, what is not a log
        return open_log(path, readonly=readonly)
    except StorageError as e:
        raise StorageFailure(str(e)) from e
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
    `at_most_unit`, rather than a floor); `digits` (optional) is the decimals shown.
    """
    table = Table(title="targets")
    for name, justify in (("figure", "left"), ("value", "right"), ("target", "right"), ("", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for t in targets:
        verdict = "[green]PASS[/]" if t["pass"] else "[red]MISS[/]"
        digits = t.get("digits", 2 if t["at_most"] else 0)
        if t["at_most"]:
            value, target = f"{t['value']:,.{digits}f}{at_most_unit}", f"≤ {t['target']:g}{at_most_unit}"
        else:
            value, target = f"{t['value']:,.{digits}f}", f"≥ {t['target']:,.{digits}f}"
        table.add_row(t["label"], value, target, verdict)
    return table
