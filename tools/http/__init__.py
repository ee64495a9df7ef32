"""The HTTP server: the broker's wire protocol, the operator API, OpenAPI and the console."""

# Layering: tools.http imports actors, projections, eventlog and tools._output; never tools.cli,
# tools.demo or tools.bench.

from .app import create_app
from .binding import PortInUseError, listen
from .forks import Fork, ForkError, Redriven, fork_run, redrive
from .travel_reads import entry_from_dict, moment_from_dict, runs_from_payload

__all__ = [
    "Fork",
    "ForkError",
    "PortInUseError",
    "Redriven",
    "create_app",
    "entry_from_dict",
    "fork_run",
    "listen",
    "moment_from_dict",
    "redrive",
    "runs_from_payload",
]
