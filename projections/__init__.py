"""Read models folded from the event log: live, on replay, or as of any past moment."""

# Layering: projections imports only eventlog. It never imports actors or tools, and every
# view is pure: no clock, no I/O, no randomness (a test enforces the imports).

from ._checkpoints import Checkpoints
from ._diff import Change, Diff, apply_diff, diff_items, text_diff
from ._replay import Mismatch, ReplayReport, compare_expected, replay_check
from ._runner import ViewRunner
from ._snapshot_check import BadSnapshot, SnapshotCheck, check_snapshots
from ._view import View, canonical, state_digest
from ._views import GLOBAL_VIEWS, Views, default_views
from .agent_runs import AgentRun, AgentRunsView
from .approvals import ApprovalHistoryView, ApprovalRow, PendingApprovalsView, RefusedAttempt
from .asks import AskRow, OpenAsksView, PeerInfo, PeersView
from .lists import LIST_PAGE, MAX_LIST_PAGE, ListPage
from .projects import Project, ProjectsView
from .run_pages import RunPage
from .runs import RECENT_PERMISSIONS, FinishStatus, FinishStatusView, RunRegistryView, RunRow
from .sessions import AgentActivityView, SessionRow, SessionsView, SessionTurn, TurnEvent
from .timeline import RunMoment, TimelineEntry, TimelineView

__all__ = [
    "GLOBAL_VIEWS",
    "LIST_PAGE",
    "MAX_LIST_PAGE",
    "RECENT_PERMISSIONS",
    "AgentActivityView",
    "AgentRun",
    "AgentRunsView",
    "ApprovalHistoryView",
    "ApprovalRow",
    "AskRow",
    "BadSnapshot",
    "Change",
    "Checkpoints",
    "Diff",
    "FinishStatus",
    "FinishStatusView",
    "ListPage",
    "Mismatch",
    "OpenAsksView",
    "PeerInfo",
    "PeersView",
    "PendingApprovalsView",
    "Project",
    "ProjectsView",
    "RefusedAttempt",
    "ReplayReport",
    "RunMoment",
    "RunPage",
    "RunRegistryView",
    "RunRow",
    "SessionRow",
    "SessionTurn",
    "SessionsView",
    "SnapshotCheck",
    "TimelineEntry",
    "TimelineView",
    "TurnEvent",
    "View",
    "ViewRunner",
    "Views",
    "apply_diff",
    "canonical",
    "check_snapshots",
    "compare_expected",
    "default_views",
    "diff_items",
    "replay_check",
    "state_digest",
    "text_diff",
]
