"""hypothesis over the wire endpoints: whatever arrives, no 5xx, and every 4xx says why.

Requests mix the fields the handlers read (with values of every JSON type), a real run's
credentials or made-up ones, content types a browser or an agent sends, and Origins.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors import OPERATOR_CONTROL_TYPES

from .conftest import OPERATOR, POST_ONLY

pytestmark = pytest.mark.slow

TOKEN = "token-of-run-a-0123456789"
FIELDS = ["run_id", "token", "id", "type", "from_run_id", "to_run_id", "payload", "state", "status",
          "summary", "files_changed", "to", "request_id", "tool_name", "description", "input_preview",
          "behavior", "created_at"]  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=40),
    st.sampled_from(["a", "b", "allow", "deny", "bash", "agent_message", *OPERATOR_CONTROL_TYPES]),
)  # fmt: skip
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
BODIES = st.dictionaries(st.sampled_from(FIELDS), VALUES, max_size=8)
CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/json; charset=utf-8",
        "text/plain",
        "application/x-www-form-urlencoded",
        "",
    ]
)
ORIGINS = st.sampled_from([None, None, "http://evil.example", "http://127.0.0.1", "null"])


@pytest.fixture
def wire(client, register):
    register("a", TOKEN)
    register("b")
    return client


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    path=st.sampled_from([*POST_ONLY, "/health"]),
    method=st.sampled_from(["POST", "POST", "POST", "GET", "PUT", "TRACE"]),
    body=BODIES,
    as_run_a=st.booleans(),
    raw=st.one_of(st.none(), st.binary(max_size=64)),
    content_type=CONTENT_TYPES,
    origin=ORIGINS,
    operator=st.booleans(),
)
def test_no_wire_request_answers_5xx_and_every_4xx_has_a_message(
    wire, path, method, body, as_run_a, raw, content_type, origin, operator
):
    if as_run_a:
        body = {**body, "run_id": "a", "token": TOKEN}
    headers = {"Content-Type": content_type}
    if origin is not None:
        headers["Origin"] = origin
    if operator:
        headers.update(OPERATOR)
    if raw is not None:
        response = wire.request(method, path, content=raw, headers=headers)
    else:  # the standard library's encoder: integers beyond 64 bits too
        response = wire.request(method, path, content=json.dumps(body).encode(), headers=headers)
    assert response.status_code < 500, (response.status_code, response.text)
    if response.status_code >= 400:
        assert response.text.strip(), f"{response.status_code} without a message"
