"""`flightlog bench`: benchmark scripts that print ratios measured side by side in one run."""

# Layering: tools.bench imports actors, projections, eventlog, tools.http (its front door)
# and tools._output; never tools.cli or tools.demo.

from .command import bench, register

__all__ = ["bench", "register"]
