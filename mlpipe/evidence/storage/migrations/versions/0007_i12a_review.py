"""Review: reviewers' decisions on candidates (citing the bundle digest they read), the later
runs that reproduced a candidate, and candidates found by their model.

Revision ID: 0007_i12a
Revises: 0006_i14a
Create Date: 2026-12-04 10:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0007_i12a'
down_revision = '0006_i14a'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'decisions',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('candidate_id', sa.String(length=32), nullable=False),
        sa.Column('bundle_digest', sa.String(length=80), nullable=False),
        sa.Column('verdict', sa.String(length=10), nullable=False),
        sa.Column('reviewer', sa.String(length=200), nullable=False),
        sa.Column('note', sa.Text(), nullable=False),
        sa.Column('policy', sa.JSON(), nullable=True),
        sa.Column('decided_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['bundle_digest'], ['bundles.digest']),
        sa.ForeignKeyConstraint(['candidate_id'], ['candidates.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_decisions_candidate', 'decisions', ['candidate_id', 'decided_at'],
                    unique=False)
    op.create_table(
        'candidate_productions',
        sa.Column('candidate_id', sa.String(length=32), nullable=False),
        sa.Column('run_id', sa.String(length=32), nullable=False),
        sa.Column('recorded_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['candidate_id'], ['candidates.id']),
        sa.ForeignKeyConstraint(['run_id'], ['runs.id']),
        sa.PrimaryKeyConstraint('candidate_id', 'run_id'),
    )
    op.create_index(op.f('ix_candidate_productions_run_id'), 'candidate_productions',
                    ['run_id'], unique=False)
    op.create_index('ix_candidates_model', 'candidates', ['model_artifact_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_candidates_model', table_name='candidates')
    op.drop_index(op.f('ix_candidate_productions_run_id'), table_name='candidate_productions')
    op.drop_table('candidate_productions')
    op.drop_index('ix_decisions_candidate', table_name='decisions')
    op.drop_table('decisions')
