"""The `flightlog` command: one click group, commands registered from their own modules."""

# Layering: tools.cli imports the demo, bench and http subpackages through their front doors
# and the shared tools._output; nothing in tools imports tools.cli.

from __future__ import annotations

from typing import Any

import click

from .. import bench, demo
from .._output import EXIT_CODES, EXIT_INTERRUPTED, Commands, clean
from . import approvals, export, fork, hook, log, mcp_server, operators, runs, serve, travel

__all__ = ["cli", "main"]


class _Flightlog(Commands):
    """The group: Ctrl-C ends any command with exit 130, a storage error with exit 8; one line each.

    An error message (which may quote run data) is cleaned before click prints it.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as e:
            e.message = clean(e.message, keep_newlines=True)
            raise
        except KeyboardInterrupt:
            click.echo("flightlog: interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)


@click.group(
    cls=_Flightlog,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=EXIT_CODES,
)
@click.version_option(package_name="flightlog")
def cli() -> None:
    """flightlog: a flight recorder and control tower for AI-agent runs.

    Every run, session and approval is recorded in one append-only, hash-chained event log.
    """


log.register(cli)
approvals.register(cli)
travel.register(cli)
runs.register(cli)
fork.register(cli)
export.register(cli)
operators.register(cli)
serve.register(cli)
hook.register(cli)
mcp_server.register(cli)
demo.register(cli)
bench.register(cli)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
