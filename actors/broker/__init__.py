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
from .gates import Gates, GateStatus
from .model import (
    OPERATOR_CONTROL_TYPES,
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

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "OPERATOR_CONTROL_TYPES",
    "AgentEvent",
    "AgentMessage",
    "AskOutcome",
    "Broker",
    "ControlMessage",
    "Envelope",
    "Finish",
    "GateStatus",
    "Gates",
    "PermissionState",
    "Recorder",
    "Reply",
    "Report",
    "RunView",
    "enrich_stop_reason",
    "make_token",
    "operator_only",
    "poll_agent_messages",
    "token_digest",
    "tool_risk",
    "wrap_agent_message",
    "wrap_channel",
    "xml_escape",
]
