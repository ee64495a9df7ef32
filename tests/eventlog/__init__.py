"""Tests of the event log: the backend contract, codec, concurrency, crashes, tampering."""
