"""a random key per database, for the task handles labelers see

`instance_secrets` holds keys every server process must share, made on first use: the first is
the one app.labeling.task_handles permutes queue slot ids with, so that the ids labelers see say
nothing about when a slot was made.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0015'
down_revision: str | None = '0014'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'instance_secrets',
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('value', sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint('name', name=op.f('pk_instance_secrets')),
    )


def downgrade() -> None:
    op.drop_table('instance_secrets')
