"""The interpreter each step ran on: its path and version, a digest of its installed package
set, and whether it was the step's declared environment (``submit --isolate``) or mlpipe's own.

Revision ID: 0005_i16
Revises: 0004_i13
Create Date: 2026-12-04 10:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0005_i16'
down_revision = '0004_i13'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('step_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('interpreter', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('step_runs', schema=None) as batch_op:
        batch_op.drop_column('interpreter')
