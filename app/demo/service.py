"""The embedded demo: MATH-500 problems, demo solutions, demo users."""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.auth.security import new_password
from app.demo.solutions import demo_solutions
from app.errors import BadInput, NotFound
from app.imports.service import import_file
from app.models import Problem, Project, Role, Solution, User, utcnow
from app.projects.schemas import ProjectCreate
from app.projects.service import create_project
from app.users.schemas import UserCreate, UserUpdate
from app.users.service import create_user, update_user

DEMO_PROJECT = "MATH-500 demo"
DEMO_USERS = (
    ("demo-labeler", Role.labeler),
    ("demo-labeler-2", Role.labeler),
    ("demo-manager", Role.manager),
    ("demo-researcher", Role.researcher),
    ("demo-admin", Role.admin),
)


# MATH-500 ships inside the package (MIT, see data/README.md) so that a clone needs nothing beside it.
MATH500 = Path(__file__).resolve().parent / "data" / "math500.jsonl"
# What the demo's labelers read first: how the three ratings and the labeling page's actions are meant.
GUIDELINES = Path(__file__).resolve().parent / "data" / "guidelines.md"


def default_problems_file() -> Path:
    """MATH-500 from STEPWISE_DEMO_PROBLEMS, else the copy shipped with the package."""
    configured = os.environ.get("STEPWISE_DEMO_PROBLEMS")
    if configured:
        return Path(configured)
    return MATH500


@dataclass
class DemoReport:
    project: str
    problems_added: int
    solutions_added: int
    logins: list[tuple[str, str, str]] = field(default_factory=list)

    def describe(self) -> str:
        lines = [
            f"Demo project {self.project!r}: {self.problems_added} problems and "
            f"{self.solutions_added} solutions added (demo data, marked as such).",
            "Demo logins (passwords are new on every `stepwise demo`):",
        ]
        lines += [f"  {role:<10} {name:<16} {password}" for name, role, password in self.logins]
        return "\n".join(lines)


def read_problems(source: Path) -> list[dict[str, Any]]:
    """The problems of a MATH-style JSONL file, one object a line (blank lines skipped). Read
    before the database is touched (`stepwise demo` migrates it first), so that a wrong
    STEPWISE_DEMO_PROBLEMS is named in one line, with the line at fault, and leaves no database
    behind."""
    if not source.is_file():
        raise NotFound(
            f"demo problems file {source} is missing: set STEPWISE_DEMO_PROBLEMS to a MATH-style "
            "JSONL file, or unset it to load the MATH-500 copy shipped with Stepwise"
        )
    problems = []
    for number, line in enumerate(source.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            problem = orjson.loads(line)
        except orjson.JSONDecodeError:
            wrong = "not JSON"
        else:
            wrong = None if isinstance(problem, dict) else "not a JSON object"
        if wrong:
            raise BadInput(f"demo problems file {source}: line {number}: {wrong} "
                           "(STEPWISE_DEMO_PROBLEMS must name a MATH-style JSONL file)")
        problems.append(problem)
    return problems


def load_demo(session: Session, problems_file: Path | None = None,
              problems: list[dict[str, Any]] | None = None) -> DemoReport:
    """Create (or refresh) the demo project and users. Running it again adds nothing new.
    `problems`: the file's, when the caller read them already (read_problems)."""
    source = problems_file or default_problems_file()
    if problems is None:
        problems = read_problems(source)
    project = session.scalar(select(Project).where(Project.name == DEMO_PROJECT))
    if project is None:
        project = create_project(
            session,
            ProjectCreate(
                name=DEMO_PROJECT,
                description=(
                    "MATH-500 test problems with demo solutions: each reference solution split "
                    "into steps, plus a wrong-final-answer variant and a one-step-slip variant "
                    "(see app/demo/solutions.py). Demo data, not model output."
                ),
                # Every demo labeler, and any labeler created later, can try it at once.
                open_to_all=True,
            ),
            is_demo=True,
        )
    if not project.guidelines:
        # A demo made before projects had guidelines gets them too; a manager's own are kept.
        project.guidelines = GUIDELINES.read_text(encoding="utf-8")
        project.guidelines_updated_at = utcnow()
    made = import_file(
        session,
        project,
        io.BytesIO(source.read_bytes()),
        filename=source.name,
        fmt="math",
        separator=None,
        user=None,
    )
    kinds: dict[tuple[str, ...], str] = {}
    lines = []
    for seed, problem in enumerate(problems):
        for solution in demo_solutions(problem["solution"], problem["answer"], seed):
            kinds[tuple(solution.steps)] = solution.kind
            lines.append(
                orjson.dumps(
                    {"problem": problem["problem"], "steps": solution.steps, "answer": solution.answer}
                )
            )
    added = import_file(
        session,
        project,
        io.BytesIO(b"\n".join(lines)),
        filename="demo-solutions.jsonl",
        fmt="solutions",
        separator=None,
        user=None,
    )
    _mark_demo(session, project, kinds)
    return DemoReport(
        project=project.name,
        problems_added=made.added.get("problems", 0),
        solutions_added=added.added.get("solutions", 0),
        logins=_demo_logins(session),
    )


def _mark_demo(session: Session, project: Project, kinds: dict[tuple[str, ...], str]) -> None:
    session.execute(update(Problem).where(Problem.project_id == project.id).values(is_demo=True))
    for solution in session.scalars(
        select(Solution).where(Solution.project_id == project.id, Solution.is_demo.is_(False))
    ):
        solution.is_demo = True
        solution.origin = {
            **(solution.origin or {}),
            "demo": kinds.get(tuple(solution.steps), "unknown"),
            "procedure": "app/demo/solutions.py",
        }


def _demo_logins(session: Session) -> list[tuple[str, str, str]]:
    """The demo users' (name, role, new password), made through the users service so that its
    rules hold: a name taken in another case is that user; run again, the earlier passwords and
    their logins end; a demo user an admin has since given another role keeps it, and it is the
    role printed. One an admin deactivated stays so, and gets no password."""
    logins = []
    for username, role in DEMO_USERS:
        password = new_password()
        user = session.scalar(select(User).where(func.lower(User.username) == username))
        if user is None:
            user = create_user(session, UserCreate(username=username, role=role, password=password))
        elif not user.is_active:
            continue
        else:
            update_user(session, user, UserUpdate(password=password), by=None)
        logins.append((user.username, user.role.value, password))
    return logins
