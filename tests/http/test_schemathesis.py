"""schemathesis against the server's OpenAPI document: no operation ever answers 5xx.

Every operation of `/openapi.json` gets a few dozen generated requests, valid and invalid,
sent to the app in process with the operator's Bearer token. Most broker requests carry
made-up run credentials and get a 4xx: that is fine; a 5xx is a bug. A generated JSON object
body is sent a second time with a real run's credentials, so the handlers behind the
credential check see generated fields too.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from actors import ApprovalRequest, System
from tools.http.app import create_app

from .conftest import OPERATOR, OPERATOR_DIGEST

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# Requests per operation (22 operations): together well under two minutes.
MAX_EXAMPLES = 40
RUN_TOKEN = "token-of-run-a-0123456789"


@pytest.fixture
def api(tmp_path):
    with System.open(tmp_path / "api.db", scheduler=False) as system:
        # Something to find: a run with a queued message, a pending approval.
        system.broker.register("a", RUN_TOKEN)
        system.broker.send("a", "steer", b'{"hello": "world"}')
        system.approvals.submit(ApprovalRequest(kind="shell", title="ls", detail="ls -la", risk="low"))
        app = create_app(
            system,
            operator_token_sha256=OPERATOR_DIGEST,
            poll_timeout=0.01,
            max_wait=0.01,
            registration="open",
        )
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


schema = schemathesis.pytest.from_fixture("api")


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_operation_answers_5xx(case):
    response = case.call(headers=OPERATOR)
    case.validate_response(response, checks=[not_a_server_error])
    assert response.status_code < 400 or response.content.strip(), "a 4xx without a message"
    if isinstance(case.body, dict) and not case.path.startswith("/api/"):
        case.body = {**case.body, "run_id": "a", "token": RUN_TOKEN}
        response = case.call(headers=OPERATOR)
        case.validate_response(response, checks=[not_a_server_error])
        assert response.status_code < 400 or response.content.strip(), "a 4xx without a message"
