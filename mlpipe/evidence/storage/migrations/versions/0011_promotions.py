"""Promotions: a candidate's model registered into a model registry (mlpipe promote), with the
decision and bundle it was gated on and the lineage tags it carries there.

Revision ID: 0011_promotions
Revises: 0010_i23b_source
Create Date: 2026-12-02 02:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0011_promotions'
down_revision = '0010_i23b_source'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'promotions',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('candidate_id', sa.String(length=32), nullable=False),
        sa.Column('decision_id', sa.Integer(), nullable=False),
        sa.Column('bundle_digest', sa.String(length=80), nullable=False),
        sa.Column('model_digest', sa.String(length=80), nullable=False),
        sa.Column('registry', sa.String(length=20), nullable=False),
        sa.Column('target', sa.String(length=500), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('version', sa.String(length=40), nullable=False),
        sa.Column('alias', sa.String(length=255), nullable=True),
        sa.Column('uri', sa.String(length=600), nullable=False),
        sa.Column('tags', sa.JSON(), nullable=False),
        sa.Column('promoted_by', sa.String(length=200), nullable=True),
        sa.Column('promoted_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['bundle_digest'], ['bundles.digest']),
        sa.ForeignKeyConstraint(['candidate_id'], ['candidates.id']),
        sa.ForeignKeyConstraint(['decision_id'], ['decisions.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('registry', 'target', 'name', 'version',
                            name='uq_promotions_version'),
    )
    op.create_index('ix_promotions_candidate', 'promotions', ['candidate_id', 'promoted_at'],
                    unique=False)


def downgrade() -> None:
    op.drop_index('ix_promotions_candidate', table_name='promotions')
    op.drop_table('promotions')
