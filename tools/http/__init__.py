"""The HTTP server: the broker's wire protocol, the operator API, OpenAPI and the console."""

# Layering: tools.http imports actors, projections, eventlog and tools._output; never tools.cli,
# tools.demo or tools.bench.

from .app import create_app
from .integrity import TAMPER_HEADER, Integrity, check_log, drop_untrusted
from .travel_reads import entry_from_dict, moment_from_dict, runs_from_payload

__all__ = [
    "TAMPER_HEADER",
    "Integrity",
    "check_log",
    "create_app",
    "drop_untrusted",
    "entry_from_dict",
    "moment_from_dict",
    "runs_from_payload",
]
