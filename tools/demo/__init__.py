"""`flightlog demo`: two agent processes on the broker and a controller run behind the gate."""

# Layering: tools.demo imports actors, projections, eventlog, tools.http (its front door)
# and tools._output; never tools.cli or tools.bench.

from .background import BackgroundServer
from .command import register

__all__ = ["BackgroundServer", "register"]
