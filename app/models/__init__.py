"""Every table, one per module; importing this package registers them all on `Base.metadata`."""

from app.models.api_token import ApiToken
from app.models.assignment import Assignment, AssignmentStatus
from app.models.audit_event import AuditEvent
from app.models.auth_session import AuthSession
from app.models.base import INT32_MAX, Base, utcnow
from app.models.guidelines_read import GuidelinesRead
from app.models.import_batch import ImportBatch, ImportFormat
from app.models.instance_secret import InstanceSecret
from app.models.label import MACHINE_SOURCES, FinishReason, Label, LabelSource
from app.models.labeler_standing import LabelerStanding, StandingDecision
from app.models.login_failure import LoginFailure, LoginKeyKind
from app.models.model_comparison import ComparisonStatus, ModelComparison
from app.models.model_version import ModelVersion
from app.models.problem import Problem
from app.models.project import LabelingMode, Project
from app.models.project_member import ProjectMember
from app.models.report import Report, ReportKind, ReportStatus
from app.models.round import ACTIVE_ROUND_STATUSES, Round, RoundStage, RoundStatus, RoundTrigger
from app.models.round_pick import PickReason, RoundPick
from app.models.round_settings import PromoteMetric, RoundSettings, ScoreKind, SelectorMode
from app.models.skip import Skip
from app.models.solution import AnswerGrade, Solution, StepsSource
from app.models.solution_score import SolutionScore
from app.models.user import Role, User

# SQLite, as PostgreSQL's sequences, never gives a new row a deleted row's id: ids are named
# outside foreign keys too (migration 0027 says where).
for _table in Base.metadata.tables.values():
    if _table.autoincrement_column is not None:
        _table.dialect_kwargs["sqlite_autoincrement"] = True

__all__ = [
    "ACTIVE_ROUND_STATUSES",
    "ApiToken",
    "Assignment",
    "AssignmentStatus",
    "AuditEvent",
    "AuthSession",
    "ComparisonStatus",
    "AnswerGrade",
    "Base",
    "FinishReason",
    "GuidelinesRead",
    "INT32_MAX",
    "ImportBatch",
    "ImportFormat",
    "InstanceSecret",
    "Label",
    "LabelSource",
    "MACHINE_SOURCES",
    "LabelerStanding",
    "LabelingMode",
    "LoginFailure",
    "LoginKeyKind",
    "ModelComparison",
    "ModelVersion",
    "PickReason",
    "Problem",
    "Project",
    "ProjectMember",
    "PromoteMetric",
    "Report",
    "ReportKind",
    "ReportStatus",
    "Role",
    "Round",
    "RoundPick",
    "RoundSettings",
    "RoundStage",
    "RoundStatus",
    "RoundTrigger",
    "ScoreKind",
    "SelectorMode",
    "Skip",
    "Solution",
    "SolutionScore",
    "StandingDecision",
    "StepsSource",
    "User",
    "utcnow",
]
