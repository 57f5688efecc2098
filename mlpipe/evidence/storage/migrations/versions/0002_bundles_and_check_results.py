"""Sealed evidence bundles, the compile-time check results of each run, and how many ranks a
global metric was aggregated over.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 10:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('metrics', schema=None) as batch_op:
        batch_op.add_column(sa.Column('reduced_over', sa.Integer(), nullable=True))

    op.create_table('check_results',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('code', sa.String(length=10), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('severity', sa.String(length=10), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('hint', sa.Text(), nullable=True),
    sa.Column('step', sa.String(length=300), nullable=True),
    sa.Column('port', sa.String(length=200), nullable=True),
    sa.Column('source', sa.String(length=500), nullable=True),
    sa.Column('target', sa.String(length=500), nullable=True),
    sa.Column('file', sa.Text(), nullable=True),
    sa.Column('line', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('check_results', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_check_results_run_id'), ['run_id'], unique=False)

    op.create_table('bundles',
    sa.Column('digest', sa.String(length=80), nullable=False),
    sa.Column('candidate_id', sa.String(length=32), nullable=False),
    sa.Column('previous_digest', sa.String(length=80), nullable=True),
    sa.Column('sealed_at', sa.DateTime(), nullable=False),
    sa.Column('content', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['candidate_id'], ['candidates.id'], ),
    sa.PrimaryKeyConstraint('digest')
    )
    with op.batch_alter_table('bundles', schema=None) as batch_op:
        batch_op.create_index('ix_bundles_candidate_sealed', ['candidate_id', 'sealed_at'],
                              unique=False)


def downgrade() -> None:
    with op.batch_alter_table('bundles', schema=None) as batch_op:
        batch_op.drop_index('ix_bundles_candidate_sealed')
    op.drop_table('bundles')
    with op.batch_alter_table('check_results', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_check_results_run_id'))
    op.drop_table('check_results')
    with op.batch_alter_table('metrics', schema=None) as batch_op:
        batch_op.drop_column('reduced_over')
