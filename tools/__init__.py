"""flightlog's edges: the CLI, the HTTP server, the web console, the demo and the benchmarks."""

# Layering: tools is the top layer. It may import eventlog, projections and actors; nothing
# in flightlog imports tools (a test enforces this).

__all__: list[str] = []
