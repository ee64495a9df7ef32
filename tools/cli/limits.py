"""`flightlog serve`'s quota options: what one run may send and hold, each with its default.

The options are applied as one decorator and gathered into an `actors.Quotas` kept in the
click context (`quotas_given()`), so that the serve command takes them as a whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from actors import Quotas

from ..http import REFUSAL_HOLD

F = TypeVar("F", bound=Callable[..., Any])
_KEY = "flightlog.quotas"
_HOLD_KEY = "flightlog.refusal_hold"
_DEFAULT = Quotas()

# (option, Quotas field, type, help): 0 turns a bound off.
_OPTIONS: tuple[tuple[str, str, Any, str], ...] = (
    (
        "--max-payload",
        "payload_bytes",
        click.IntRange(0),
        "Bytes of a report's, finish's, reply's or message's JSON payload; more gets 413.",
    ),
    (
        "--max-text",
        "text_bytes",
        click.IntRange(0),
        "Bytes of each other text field a run writes (state, status, summary, files changed, a "
        "permission request's tool name, description, preview); more gets 413.",
    ),
    (
        "--max-peer-field",
        "peer_field_bytes",
        click.IntRange(0),
        "Bytes of each peer field at /register (label, backend, model, dir, status); more gets 413.",
    ),
    (
        "--events-per-second",
        "events_per_second",
        click.FloatRange(0),
        "Writes a second each run may make on average (a token bucket); faster gets 429 and Retry-After.",
    ),
    (
        "--burst",
        "burst",
        click.IntRange(1),
        "Writes a run may make at once above that rate (the bucket's size).",
    ),
    (
        "--max-open-permissions",
        "open_permissions",
        click.IntRange(0),
        "Permission requests of one run waiting for a decision at once; one more gets 429.",
    ),
    (
        "--max-open-asks",
        "open_asks",
        click.IntRange(0),
        "Asks of one run waiting for their replies at once; one more gets 429.",
    ),
    (
        "--queue-share",
        "queue_share",
        click.IntRange(0),
        "Undelivered messages one run may hold in another run's queue (0: a quarter of --queue-limit); "
        "one more gets 429. Operator control is never refused.",
    ),
    (
        "--max-queue-bytes",
        "queue_bytes",
        click.IntRange(0),
        "Payload bytes of the undelivered messages from runs one run's queue may hold (what they keep "
        "in the server's memory); one more message gets 429. Operator control is never refused.",
    ),
)


def quota_options(fn: F) -> F:
    """Add the quota options to a command; their values land in `quotas_given()` (and the
    refusal hold in `refusal_hold_given()`)."""
    fn = click.option(
        "--refusal-hold",
        type=click.FloatRange(0),
        default=REFUSAL_HOLD,
        show_default=True,
        expose_value=False,
        callback=_keep_hold,
        help="Seconds a connection is not read after an answer refusing a request (413, 429): a "
        "client flooding with refused requests is slowed, other connections are not. 0: not held "
        "(behind a proxy that carries many clients on one connection).",
    )(fn)
    for flag, field, kind, help in reversed(_OPTIONS):
        fn = click.option(
            flag,
            field,
            type=kind,
            default=getattr(_DEFAULT, field),
            show_default=True,
            expose_value=False,
            callback=_keep,
            help=help if field in ("burst", "queue_share") else f"{help} 0: no bound.",
        )(fn)
    return fn


def _keep(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    given: dict[str, Any] = ctx.meta.setdefault(_KEY, {})
    assert param.name is not None
    given[param.name] = value
    return value


def _keep_hold(ctx: click.Context, param: click.Parameter, value: float) -> float:
    ctx.meta[_HOLD_KEY] = value
    return value


def refusal_hold_given() -> float:
    """The `--refusal-hold` the current command was given."""
    return float(click.get_current_context().meta.get(_HOLD_KEY, REFUSAL_HOLD))


def quotas_given() -> Quotas:
    """The quotas the current command was given (the defaults for those it was not)."""
    ctx = click.get_current_context()
    return Quotas(**ctx.meta.get(_KEY, {}))
