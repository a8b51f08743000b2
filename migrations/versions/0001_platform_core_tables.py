"""platform core tables

Revision ID: 0001
Revises: 
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('projects',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('labeling_mode', sa.Enum('first_error', 'full', name='labelingmode', native_enum=False, length=16), nullable=False),
    sa.Column('overlap', sa.Integer(), nullable=False),
    sa.Column('lease_minutes', sa.Integer(), nullable=False),
    sa.Column('is_demo', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('lease_minutes >= 1 AND lease_minutes <= 1440', name=op.f('ck_projects_lease_range')),
    sa.CheckConstraint('overlap >= 1 AND overlap <= 20', name=op.f('ck_projects_overlap_range')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_projects')),
    sa.UniqueConstraint('name', name=op.f('uq_projects_name'))
    )
    op.create_table('users',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('username', sa.String(length=64), nullable=False),
    sa.Column('password_hash', sa.String(length=255), nullable=False),
    sa.Column('role', sa.Enum('labeler', 'manager', 'researcher', 'admin', name='role', native_enum=False, length=16), nullable=False),
    sa.Column('labeler_uuid', sa.String(length=36), nullable=False),
    sa.Column('is_active', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_users')),
    sa.UniqueConstraint('labeler_uuid', name=op.f('uq_users_labeler_uuid')),
    sa.UniqueConstraint('username', name=op.f('uq_users_username'))
    )
    op.create_table('api_tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_api_tokens_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_api_tokens_token_hash'))
    )
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_api_tokens_user_id'), ['user_id'], unique=False)

    op.create_table('auth_sessions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('csrf_token', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_auth_sessions_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_auth_sessions')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_auth_sessions_token_hash'))
    )
    with op.batch_alter_table('auth_sessions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_auth_sessions_user_id'), ['user_id'], unique=False)

    op.create_table('import_batches',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('filename', sa.String(length=255), nullable=False),
    sa.Column('format', sa.Enum('prm800k', 'math', 'solutions', name='importformat', native_enum=False, length=16), nullable=False),
    sa.Column('file_sha256', sa.String(length=64), nullable=False),
    sa.Column('lines', sa.Integer(), nullable=False),
    sa.Column('added', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_import_batches_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_import_batches_user_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_import_batches'))
    )
    with op.batch_alter_table('import_batches', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_import_batches_file_sha256'), ['file_sha256'], unique=False)
        batch_op.create_index(batch_op.f('ix_import_batches_project_id'), ['project_id'], unique=False)

    op.create_table('problems',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('statement', sa.Text(), nullable=False),
    sa.Column('answer', sa.Text(), nullable=True),
    sa.Column('reference_solution', sa.Text(), nullable=True),
    sa.Column('subject', sa.String(length=100), nullable=True),
    sa.Column('level', sa.Integer(), nullable=True),
    sa.Column('split', sa.String(length=32), nullable=True),
    sa.Column('source_id', sa.String(length=255), nullable=True),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('is_demo', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_problems_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_problems')),
    sa.UniqueConstraint('project_id', 'content_hash', name=op.f('uq_problems_project_id_content_hash'))
    )
    op.create_table('solutions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('problem_id', sa.Integer(), nullable=False),
    sa.Column('steps', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=False),
    sa.Column('steps_source', sa.Enum('given', 'label', name='stepssource', native_enum=False, length=16), nullable=False),
    sa.Column('final_answer', sa.String(length=1000), nullable=True),
    sa.Column('answer_grade', sa.Enum('right', 'wrong', 'no_answer', 'ungraded', name='answergrade', native_enum=False, length=16), nullable=False),
    sa.Column('grader_version', sa.String(length=64), nullable=True),
    sa.Column('verifier_score', sa.Float(), nullable=True),
    sa.Column('origin', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=False),
    sa.Column('generation', sa.Integer(), nullable=True),
    sa.Column('priority', sa.Float(), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('import_batch_id', sa.Integer(), nullable=True),
    sa.Column('is_demo', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['import_batch_id'], ['import_batches.id'], name=op.f('fk_solutions_import_batch_id_import_batches'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['problem_id'], ['problems.id'], name=op.f('fk_solutions_problem_id_problems'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_solutions_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_solutions')),
    sa.UniqueConstraint('project_id', 'content_hash', name=op.f('uq_solutions_project_id_content_hash'))
    )
    with op.batch_alter_table('solutions', schema=None) as batch_op:
        batch_op.create_index('ix_solutions_problem_id', ['problem_id'], unique=False)

    op.create_table('assignments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('solution_id', sa.Integer(), nullable=False),
    sa.Column('slot', sa.Integer(), nullable=False),
    sa.Column('priority', sa.Float(), nullable=False),
    sa.Column('status', sa.Enum('waiting', 'leased', 'done', name='assignmentstatus', native_enum=False, length=16), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('generation', sa.Integer(), nullable=True),
    sa.Column('leased_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('done_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_assignments_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['solution_id'], ['solutions.id'], name=op.f('fk_assignments_solution_id_solutions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_assignments_user_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_assignments')),
    sa.UniqueConstraint('solution_id', 'slot', name=op.f('uq_assignments_solution_id_slot'))
    )
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.create_index('ix_assignments_leases', ['expires_at'], unique=False, postgresql_where=sa.text("status = 'leased'"), sqlite_where=sa.text("status = 'leased'"))
        batch_op.create_index('ix_assignments_queue', ['project_id', 'priority', 'id'], unique=False, postgresql_where=sa.text("status = 'waiting'"), sqlite_where=sa.text("status = 'waiting'"))
        batch_op.create_index('ix_assignments_user', ['user_id', 'solution_id'], unique=False)

    op.create_table('labels',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('solution_id', sa.Integer(), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=True),
    sa.Column('user_id', sa.Integer(), nullable=True),
    sa.Column('foreign_labeler', sa.String(length=100), nullable=True),
    sa.Column('generation', sa.Integer(), nullable=True),
    sa.Column('is_quality_control', sa.Boolean(), nullable=False),
    sa.Column('is_initial_screening', sa.Boolean(), nullable=False),
    sa.Column('finish_reason', sa.Enum('found_error', 'solution', 'bad_problem', 'give_up', name='finishreason', native_enum=False, length=16), nullable=True),
    sa.Column('finish_note', sa.Text(), nullable=True),
    sa.Column('total_time_ms', sa.Integer(), nullable=True),
    sa.Column('steps', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=False),
    sa.Column('idempotency_key', sa.String(length=100), nullable=True),
    sa.Column('content_hash', sa.String(length=64), nullable=True),
    sa.Column('import_batch_id', sa.Integer(), nullable=True),
    sa.Column('extra', sa.JSON().with_variant(postgresql.JSONB(), 'postgresql'), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_labels_assignment_id_assignments'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['import_batch_id'], ['import_batches.id'], name=op.f('fk_labels_import_batch_id_import_batches'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_labels_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['solution_id'], ['solutions.id'], name=op.f('fk_labels_solution_id_solutions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_labels_user_id_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_labels')),
    sa.UniqueConstraint('assignment_id', name=op.f('uq_labels_assignment_id')),
    sa.UniqueConstraint('project_id', 'content_hash', name=op.f('uq_labels_project_id_content_hash')),
    sa.UniqueConstraint('user_id', 'idempotency_key', name=op.f('uq_labels_user_id_idempotency_key'))
    )
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.create_index('ix_labels_project_created', ['project_id', 'created_at'], unique=False)
        batch_op.create_index('ix_labels_solution_id', ['solution_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.drop_index('ix_labels_solution_id')
        batch_op.drop_index('ix_labels_project_created')

    op.drop_table('labels')
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_index('ix_assignments_user')
        batch_op.drop_index('ix_assignments_queue', postgresql_where=sa.text("status = 'waiting'"), sqlite_where=sa.text("status = 'waiting'"))
        batch_op.drop_index('ix_assignments_leases', postgresql_where=sa.text("status = 'leased'"), sqlite_where=sa.text("status = 'leased'"))

    op.drop_table('assignments')
    with op.batch_alter_table('solutions', schema=None) as batch_op:
        batch_op.drop_index('ix_solutions_problem_id')

    op.drop_table('solutions')
    op.drop_table('problems')
    with op.batch_alter_table('import_batches', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_import_batches_project_id'))
        batch_op.drop_index(batch_op.f('ix_import_batches_file_sha256'))

    op.drop_table('import_batches')
    with op.batch_alter_table('auth_sessions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_auth_sessions_user_id'))

    op.drop_table('auth_sessions')
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_api_tokens_user_id'))

    op.drop_table('api_tokens')
    op.drop_table('users')
    op.drop_table('projects')
