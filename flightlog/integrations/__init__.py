"""Adapters that put flightlog's gate and flight record into agent frameworks."""

# Layering: the adapters are built on the SDK (`flightlog`) alone, never on the server's layers.
# Each imports its framework in its own module only (`flightlog.integrations.langgraph`,
# `flightlog.integrations.openai_agents`; installed by the extras of the same names), so neither
# `import flightlog` nor this package imports a framework. `checkpoints` imports no framework:
# whoever resumes a recorded LangGraph run (a fork) reads the record without LangGraph.

__all__: list[str] = []
