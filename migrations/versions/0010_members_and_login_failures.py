"""project membership, and failed logins counted in the database

Projects get `open_to_all` (true for every existing project, so nobody loses access) and a
member list for the projects that are not open; `login_failures` counts failed logins per
username and per client address for the login throttle.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.add_column(sa.Column('open_to_all', sa.Boolean(), nullable=False,
                                      server_default=sa.true()))
    op.create_table(
        'project_members',
        sa.Column('project_id', sa.Integer(), nullable=False),
        sa.Column('user_id', sa.Integer(), nullable=False),
        sa.Column('added_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['project_id'], ['projects.id'],
                                name=op.f('fk_project_members_project_id_projects'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['user_id'], ['users.id'],
                                name=op.f('fk_project_members_user_id_users'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('project_id', 'user_id', name=op.f('pk_project_members')),
    )
    op.create_index(op.f('ix_project_members_user_id'), 'project_members', ['user_id'], unique=False)
    op.create_table(
        'login_failures',
        sa.Column('kind', sa.Enum('username', 'address', name='loginkeykind', native_enum=False,
                                  length=16), nullable=False),
        sa.Column('key', sa.String(length=255), nullable=False),
        sa.Column('failures', sa.Integer(), nullable=False),
        sa.Column('window_started_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('locked_until', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('kind', 'key', name=op.f('pk_login_failures')),
    )


def downgrade() -> None:
    op.drop_table('login_failures')
    op.drop_index(op.f('ix_project_members_user_id'), table_name='project_members')
    op.drop_table('project_members')
    with op.batch_alter_table('projects', schema=None) as batch_op:
        batch_op.drop_column('open_to_all')
