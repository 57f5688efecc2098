"""Indexes for the commands that read: runs and candidates newest first (``mlpipe runs``,
``mlpipe candidates``) walk an index instead of sorting the whole table.

Revision ID: 0004_i13
Revises: 0003_i17
Create Date: 2026-12-03 10:00:00
"""
from alembic import op

revision = '0004_i13'
down_revision = '0003_i17'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_runs_started', 'runs', ['started_at', 'id'], unique=False)
    op.create_index('ix_candidates_created', 'candidates', ['created_at', 'id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_candidates_created', table_name='candidates')
    op.drop_index('ix_runs_started', table_name='runs')
