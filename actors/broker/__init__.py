"""The run broker: runs register, report, finish, poll control messages and message each other."""

# Layering: actors.broker imports the actors shell, actors.approvals (its front door), eventlog and
# projections; never controller, sessions or tools.

from .agents import (
    AgentEvent,
    Recorder,
    enrich_stop_reason,
    poll_agent_messages,
    wrap_agent_message,
    wrap_channel,
    xml_escape,
)
from .asks import AskOutcome
from .broker import Broker
from .conversation import DEFAULT_ASK_TIMEOUT
from .fork import BrokerFork, fork_broker_run
from .gates import Gates, GateStatus
from .hot import MAX_REGISTERED_RUN_ID, registration_error
from .model import (
    OPERATOR_CONTROL_TYPES,
    ORIGIN_ENROLMENT,
    ORIGIN_LOCAL,
    ORIGIN_OPERATOR,
    ORIGIN_SELF,
    ORIGINS,
    AgentMessage,
    ControlMessage,
    Envelope,
    Finish,
    PermissionState,
    Reply,
    Report,
    RunView,
    make_token,
    operator_only,
    token_digest,
)
from .permissions import tool_risk
from .quotas import Buckets, Quotas
from .view import RunPage

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "MAX_REGISTERED_RUN_ID",
    "OPERATOR_CONTROL_TYPES",
    "ORIGINS",
    "ORIGIN_ENROLMENT",
    "ORIGIN_LOCAL",
    "ORIGIN_OPERATOR",
    "ORIGIN_SELF",
    "AgentEvent",
    "AgentMessage",
    "AskOutcome",
    "Broker",
    "BrokerFork",
    "Buckets",
    "ControlMessage",
    "Envelope",
    "Finish",
    "GateStatus",
    "Gates",
    "PermissionState",
    "Quotas",
    "Recorder",
    "Reply",
    "Report",
    "RunPage",
    "RunView",
    "enrich_stop_reason",
    "fork_broker_run",
    "make_token",
    "operator_only",
    "poll_agent_messages",
    "registration_error",
    "token_digest",
    "tool_risk",
    "wrap_agent_message",
    "wrap_channel",
    "xml_escape",
]
