"""The HTTP server: the broker's wire protocol, the operator API, OpenAPI and the console."""

# Layering: tools.http imports actors, projections, eventlog and tools._output; never tools.cli,
# tools.demo or tools.bench.

from __future__ import annotations

from typing import TYPE_CHECKING

from .app import create_app
from .binding import PortInUseError, listen, server_config
from .broker import REGISTRATION_MODES
from .integrity import TAMPER_HEADER
from .travel_reads import entry_from_dict, moment_from_dict, runs_from_payload
from .wire import REFUSAL_HOLD

if TYPE_CHECKING:
    from .protocol import ReadDeadlineProtocol

__all__ = [
    "REFUSAL_HOLD",
    "REGISTRATION_MODES",
    "TAMPER_HEADER",
    "PortInUseError",
    "create_app",
    "entry_from_dict",
    "listen",
    "moment_from_dict",
    "read_deadline_protocol",
    "runs_from_payload",
    "server_config",
]


def read_deadline_protocol(read_timeout: float) -> type[ReadDeadlineProtocol]:
    """uvicorn's HTTP protocol with a read deadline per request (see `tools.http.protocol`)."""
    from .protocol import read_deadline_protocol as make  # uvicorn loads only for a server

    return make(read_timeout)
