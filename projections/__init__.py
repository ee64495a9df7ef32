"""Read models folded from the event log: live, on replay, or as of any past moment."""

# Layering: projections imports only eventlog. It never imports actors or tools, and every
# view is pure: no clock, no I/O, no randomness (a test enforces the imports).

__all__: list[str] = []
