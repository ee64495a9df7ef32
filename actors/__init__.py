"""The live system: pykka actors over pure deciders, and the seed packages' APIs."""

# Layering: actors imports eventlog and projections, never tools (a test enforces this).

__all__: list[str] = []
