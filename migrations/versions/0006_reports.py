"""reports reach managers: a reports table, and problems a manager can retire

A give-up, a bad-problem report and each flagged step become a report row with a status a
manager can set to dismissed; `problems.retired_at` marks a problem the queue no longer serves.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BAD_PROBLEM = sa.text("kind = 'bad_problem'")


def upgrade() -> None:
    op.create_table('reports',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('label_id', sa.Integer(), nullable=False),
    sa.Column('solution_id', sa.Integer(), nullable=False),
    sa.Column('problem_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('kind', sa.Enum('give_up', 'bad_problem', 'flagged_step', name='reportkind', native_enum=False, length=16), nullable=False),
    sa.Column('step', sa.Integer(), nullable=True),
    sa.Column('status', sa.Enum('open', 'dismissed', name='reportstatus', native_enum=False, length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('dismissed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('dismissed_by_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['dismissed_by_id'], ['users.id'], name=op.f('fk_reports_dismissed_by_id_users'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['label_id'], ['labels.id'], name=op.f('fk_reports_label_id_labels'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['problem_id'], ['problems.id'], name=op.f('fk_reports_problem_id_problems'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_reports_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['solution_id'], ['solutions.id'], name=op.f('fk_reports_solution_id_solutions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_reports_user_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_reports'))
    )
    op.create_index('ix_reports_project_id', 'reports', ['project_id', 'id'], unique=False)
    op.create_index('ix_reports_label_id', 'reports', ['label_id'], unique=False)
    op.create_index(
        'ix_reports_bad_problems',
        'reports',
        ['user_id', 'problem_id'],
        unique=False,
        postgresql_where=BAD_PROBLEM,
        sqlite_where=BAD_PROBLEM,
    )
    with op.batch_alter_table('problems', schema=None) as batch_op:
        batch_op.add_column(sa.Column('retired_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('problems', schema=None) as batch_op:
        batch_op.drop_column('retired_at')
    op.drop_index('ix_reports_bad_problems', table_name='reports', postgresql_where=BAD_PROBLEM, sqlite_where=BAD_PROBLEM)
    op.drop_index('ix_reports_label_id', table_name='reports')
    op.drop_index('ix_reports_project_id', table_name='reports')
    op.drop_table('reports')
