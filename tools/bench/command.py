"""`flightlog bench`: benchmark scripts that print ratios measured side by side in one run."""

from __future__ import annotations

import click


@click.group("bench")
def bench() -> None:
    """Measure flightlog next to raw SQLite and peer libraries, in one run on this machine.

    Every benchmark prints its figures and the ratios between them; `--json` prints one JSON
    object, `--quick` a smaller run that still prints every ratio.

    \b
    Example:
      flightlog bench log --quick
      flightlog bench approvals --json > approvals.json
      flightlog bench console --quick
      flightlog bench soak --quick
      flightlog bench workers --quick
    """


def register(cli: click.Group) -> None:
    from .approvals import bench_approvals
    from .broker import bench_broker
    from .console import bench_console
    from .log import bench_log
    from .replay import bench_replay
    from .soak import bench_soak
    from .workers import bench_workers

    bench.add_command(bench_log)
    bench.add_command(bench_approvals)
    bench.add_command(bench_replay)
    bench.add_command(bench_broker)
    bench.add_command(bench_console)
    bench.add_command(bench_soak)
    bench.add_command(bench_workers)
    cli.add_command(bench)
