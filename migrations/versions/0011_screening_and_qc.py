"""screening and QC settings on projects, and managers' decisions about labelers

Projects get screening (`screening_items`, `screening_pass_mark`) and quality-control settings
(`qc_rate`, `qc_feedback`, `qc_pause_below`), all off for existing projects;
`labeler_standings` keeps a manager's admit or retire decision per labeler and project.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.add_column(sa.Column('screening_items', sa.Integer(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('screening_pass_mark', sa.Float(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('qc_rate', sa.Float(), nullable=False, server_default='0'))
        batch_op.add_column(sa.Column('qc_feedback', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column('qc_pause_below', sa.Float(), nullable=False, server_default='0'))
        batch_op.create_check_constraint(
            op.f('ck_projects_screening_items_range'), 'screening_items >= 0 AND screening_items <= 100')
        batch_op.create_check_constraint(
            op.f('ck_projects_screening_pass_mark_range'), 'screening_pass_mark >= 0 AND screening_pass_mark <= 1')
        batch_op.create_check_constraint(op.f('ck_projects_qc_rate_range'), 'qc_rate >= 0 AND qc_rate <= 1')
        batch_op.create_check_constraint(
            op.f('ck_projects_qc_pause_below_range'), 'qc_pause_below >= 0 AND qc_pause_below <= 1')
    op.create_table(
        'labeler_standings',
        sa.Column('project_id', sa.Integer(), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('decision', sa.Enum('admitted', 'retired', name='standingdecision', native_enum=False,
                                      length=16), nullable=False),
        sa.Column('decided_by', sa.Integer(), nullable=True),
        sa.Column('decided_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['decided_by'], ['users.id'],
                                name=op.f('fk_labeler_standings_decided_by_users'), ondelete='SET NULL'),
        sa.ForeignKeyConstraint(['project_id'], ['projects.id'],
                                name=op.f('fk_labeler_standings_project_id_projects'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['user_id'], ['users.id'],
                                name=op.f('fk_labeler_standings_user_id_users'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('project_id', 'user_id', name=op.f('pk_labeler_standings')),
    )


def downgrade() -> None:
    op.drop_table('labeler_standings')
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.drop_constraint(op.f('ck_projects_qc_pause_below_range'), type_='check')
        batch_op.drop_constraint(op.f('ck_projects_qc_rate_range'), type_='check')
        batch_op.drop_constraint(op.f('ck_projects_screening_pass_mark_range'), type_='check')
        batch_op.drop_constraint(op.f('ck_projects_screening_items_range'), type_='check')
        batch_op.drop_column('qc_pause_below')
        batch_op.drop_column('qc_feedback')
        batch_op.drop_column('qc_rate')
        batch_op.drop_column('screening_pass_mark')
        batch_op.drop_column('screening_items')

