"""Harnesses run an agent's turn: the protocol, a scripted player and a JSON-lines program."""

# Layering: actors.harnesses imports the actors shell and eventlog only; every other concept builds on it.

from .command import CommandHarness
from .harness import (
    ASSISTANT_MESSAGE,
    COMPACTION,
    DELIVERIES,
    ENQUEUE,
    IMMEDIATE,
    PERMISSION_REQUEST,
    SESSION_ERROR,
    SESSION_IDLE,
    SESSION_SHUTDOWN,
    SESSION_STARTED,
    Harness,
    HarnessEvent,
    Publish,
)
from .scripted import JOIN_TIMEOUT, TERMINAL, ScriptedHarness, SentPrompt

__all__ = [
    "ASSISTANT_MESSAGE",
    "COMPACTION",
    "DELIVERIES",
    "ENQUEUE",
    "IMMEDIATE",
    "JOIN_TIMEOUT",
    "PERMISSION_REQUEST",
    "SESSION_ERROR",
    "SESSION_IDLE",
    "SESSION_SHUTDOWN",
    "SESSION_STARTED",
    "TERMINAL",
    "CommandHarness",
    "Harness",
    "HarnessEvent",
    "Publish",
    "ScriptedHarness",
    "SentPrompt",
]
