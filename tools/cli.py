"""The `flightlog` command: one click group, commands registered from their own modules."""

from __future__ import annotations

import click

from . import _cli_approvals, _cli_export, _cli_fork, _cli_log, _cli_serve, _cli_travel, _demo


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="flightlog")
def cli() -> None:
    """flightlog: a flight recorder and control tower for AI-agent runs.

    Every run, session and approval is recorded in one append-only, hash-chained event log.
    """


_cli_log.register(cli)
_cli_approvals.register(cli)
_cli_travel.register(cli)
_cli_fork.register(cli)
_cli_export.register(cli)
_cli_serve.register(cli)
_demo.register(cli)


def _register_bench() -> None:
    from . import _bench

    _bench.register(cli)


_register_bench()


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
