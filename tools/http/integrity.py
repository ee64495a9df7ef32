"""The HTTP server's word on integrity: the tamper header every answer carries (what was verified
of the log is `tools._integrity`, which the CLI computes too)."""

from __future__ import annotations

from .._integrity import Integrity

TAMPER_HEADER = "Flightlog-Tamper"

__all__ = ["TAMPER_HEADER", "Integrity"]
