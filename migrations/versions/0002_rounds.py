"""active-learning rounds: rounds, model versions, picks, scores, round settings; the job queue

On PostgreSQL this also installs procrastinate's schema (the job queue that wakes round
workers) in a schema of its own, `procrastinate`, so that its tables stay apart from ours.
SQLite has no job queue: the embedded server runs rounds in a local worker thread.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JOB_QUEUE_SCHEMA = 'procrastinate'

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    _create_tables()
    if op.get_bind().dialect.name == 'postgresql':
        _install_job_queue()


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute(f'DROP SCHEMA IF EXISTS {JOB_QUEUE_SCHEMA} CASCADE')
    _drop_tables()


def _install_job_queue() -> None:
    from procrastinate.schema import SchemaManager

    bind = op.get_bind()
    search_path = bind.exec_driver_sql('SHOW search_path').scalar()
    op.execute(f'CREATE SCHEMA {JOB_QUEUE_SCHEMA}')
    # The schema file names its objects without a schema: they land first in the search path.
    bind.exec_driver_sql(f"SELECT set_config('search_path', '{JOB_QUEUE_SCHEMA}', true)")
    bind.exec_driver_sql(SchemaManager.get_schema().replace('%', '%%'))
    # Its functions and triggers name its tables without a schema too; pinning their search
    # path lets any connection (a psql session, a cleanup script) touch the tables safely.
    op.execute(f"""
        DO $$
        DECLARE f record;
        BEGIN
            FOR f IN SELECT p.oid::regprocedure AS signature FROM pg_proc p
                     JOIN pg_namespace n ON n.oid = p.pronamespace
                     WHERE n.nspname = '{JOB_QUEUE_SCHEMA}' LOOP
                EXECUTE format('ALTER FUNCTION %s SET search_path = {JOB_QUEUE_SCHEMA}, pg_catalog',
                               f.signature);
            END LOOP;
        END $$;
    """)
    bind.exec_driver_sql("SELECT set_config('search_path', %(path)s, true)", {'path': search_path})


def _create_tables() -> None:
    op.create_table('round_settings',
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('picks_per_round', sa.Integer(), nullable=False),
    sa.Column('per_problem_cap', sa.Integer(), nullable=False),
    sa.Column('wrong_share', sa.Float(), nullable=False),
    sa.Column('control_share', sa.Float(), nullable=False),
    sa.Column('qc_share', sa.Float(), nullable=False),
    sa.Column('duplicate_similarity', sa.Float(), nullable=False),
    sa.Column('score_kind', sa.Enum('product', 'minimum', name='scorekind', native_enum=False, length=16), nullable=False),
    sa.Column('neutral_as_correct', sa.Boolean(), nullable=False),
    sa.Column('base_model', sa.String(length=255), nullable=False),
    sa.Column('train_epochs', sa.Float(), nullable=False),
    sa.Column('learning_rate', sa.Float(), nullable=False),
    sa.Column('max_length', sa.Integer(), nullable=False),
    sa.Column('min_train_labels', sa.Integer(), nullable=False),
    sa.Column('heldout_share', sa.Float(), nullable=False),
    sa.Column('promote_metric', sa.Enum('step_auroc', 'first_error_f1', 'best_of_n', name='promotemetric', native_enum=False, length=16), nullable=False),
    sa.Column('promote_min', sa.Float(), nullable=False),
    sa.Column('promote_margin', sa.Float(), nullable=False),
    sa.Column('every_new_labels', sa.Integer(), nullable=True),
    sa.Column('schedule_hours', sa.Float(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint('control_share >= 0 AND control_share <= 1', name=op.f('ck_round_settings_control_share_range')),
    sa.CheckConstraint('heldout_share > 0 AND heldout_share < 1', name=op.f('ck_round_settings_heldout_range')),
    sa.CheckConstraint('per_problem_cap >= 1', name=op.f('ck_round_settings_cap_range')),
    sa.CheckConstraint('picks_per_round >= 1 AND picks_per_round <= 100000', name=op.f('ck_round_settings_picks_range')),
    sa.CheckConstraint('qc_share >= 0 AND qc_share <= 1', name=op.f('ck_round_settings_qc_share_range')),
    sa.CheckConstraint('wrong_share >= 0 AND wrong_share <= 1', name=op.f('ck_round_settings_wrong_share_range')),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_round_settings_project_id_projects'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project_id', name=op.f('pk_round_settings'))
    )
    op.create_table('rounds',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('status', sa.Enum('queued', 'running', 'done', 'failed', 'cancelled', name='roundstatus', native_enum=False, length=16), nullable=False),
    sa.Column('stage', sa.Enum('snapshot', 'train', 'evaluate', 'promote', 'score', 'select', 'enqueue', 'done', name='roundstage', native_enum=False, length=16), nullable=False),
    sa.Column('percent', sa.Float(), nullable=False),
    sa.Column('eta_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('message', sa.String(length=500), nullable=False),
    sa.Column('trigger', sa.Enum('manual', 'labels', 'schedule', name='roundtrigger', native_enum=False, length=16), nullable=False),
    sa.Column('requested_by', sa.Integer(), nullable=True),
    sa.Column('snapshot_label_id', sa.Integer(), nullable=True),
    sa.Column('snapshot_labels', sa.Integer(), nullable=True),
    sa.Column('snapshot_hash', sa.String(length=64), nullable=True),
    sa.Column('promoted', sa.Boolean(), nullable=True),
    sa.Column('metrics', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('lease_owner', sa.String(length=100), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_rounds_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['requested_by'], ['users.id'], name=op.f('fk_rounds_requested_by_users'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rounds')),
    sa.UniqueConstraint('project_id', 'number', name=op.f('uq_rounds_project_id_number'))
    )
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.create_index('ix_rounds_active', ['status'], unique=False, postgresql_where=sa.text("status IN ('queued', 'running')"), sqlite_where=sa.text("status IN ('queued', 'running')"))
        batch_op.create_index('uq_rounds_one_active', ['project_id'], unique=True, postgresql_where=sa.text("status IN ('queued', 'running')"), sqlite_where=sa.text("status IN ('queued', 'running')"))

    op.create_table('model_versions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('round_id', sa.Integer(), nullable=True),
    sa.Column('path', sa.String(length=1000), nullable=False),
    sa.Column('base', sa.String(length=255), nullable=False),
    sa.Column('data_hash', sa.String(length=64), nullable=False),
    sa.Column('train_labels', sa.Integer(), nullable=False),
    sa.Column('metrics', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('passed', sa.Boolean(), nullable=True),
    sa.Column('is_served', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('promoted_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['project_id'], ['projects.id'], name=op.f('fk_model_versions_project_id_projects'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_model_versions_round_id_rounds'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_model_versions')),
    sa.UniqueConstraint('round_id', name=op.f('uq_model_versions_round_id'))
    )
    with op.batch_alter_table('model_versions', schema=None) as batch_op:
        batch_op.create_index('uq_model_versions_served', ['project_id'], unique=True, postgresql_where=sa.text('is_served'), sqlite_where=sa.text('is_served'))

    op.create_table('round_picks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('round_id', sa.Integer(), nullable=False),
    sa.Column('solution_id', sa.Integer(), nullable=False),
    sa.Column('model_version_id', sa.Integer(), nullable=True),
    sa.Column('rank', sa.Integer(), nullable=False),
    sa.Column('score', sa.Float(), nullable=True),
    sa.Column('reason', sa.Enum('convincing_wrong', 'top_scored', 'random_control', 'qc', 'no_model', name='pickreason', native_enum=False, length=24), nullable=False),
    sa.Column('answer_grade', sa.String(length=16), nullable=False),
    sa.Column('priority', sa.Float(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_version_id'], ['model_versions.id'], name=op.f('fk_round_picks_model_version_id_model_versions'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_round_picks_round_id_rounds'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['solution_id'], ['solutions.id'], name=op.f('fk_round_picks_solution_id_solutions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_round_picks')),
    sa.UniqueConstraint('round_id', 'solution_id', name=op.f('uq_round_picks_round_id_solution_id'))
    )
    with op.batch_alter_table('round_picks', schema=None) as batch_op:
        batch_op.create_index('ix_round_picks_solution_id', ['solution_id'], unique=False)

    op.create_table('solution_scores',
    sa.Column('model_version_id', sa.Integer(), nullable=False),
    sa.Column('solution_id', sa.Integer(), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.Column('step_scores', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['model_version_id'], ['model_versions.id'], name=op.f('fk_solution_scores_model_version_id_model_versions'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['solution_id'], ['solutions.id'], name=op.f('fk_solution_scores_solution_id_solutions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('model_version_id', 'solution_id', name=op.f('pk_solution_scores'))
    )
    with op.batch_alter_table('solution_scores', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_solution_scores_solution_id'), ['solution_id'], unique=False)



def _drop_tables() -> None:
    with op.batch_alter_table('solution_scores', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_solution_scores_solution_id'))

    op.drop_table('solution_scores')
    with op.batch_alter_table('round_picks', schema=None) as batch_op:
        batch_op.drop_index('ix_round_picks_solution_id')

    op.drop_table('round_picks')
    with op.batch_alter_table('model_versions', schema=None) as batch_op:
        batch_op.drop_index('uq_model_versions_served', postgresql_where=sa.text('is_served'), sqlite_where=sa.text('is_served'))

    op.drop_table('model_versions')
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.drop_index('uq_rounds_one_active', postgresql_where=sa.text("status IN ('queued', 'running')"), sqlite_where=sa.text("status IN ('queued', 'running')"))
        batch_op.drop_index('ix_rounds_active', postgresql_where=sa.text("status IN ('queued', 'running')"), sqlite_where=sa.text("status IN ('queued', 'running')"))

    op.drop_table('rounds')
    op.drop_table('round_settings')
