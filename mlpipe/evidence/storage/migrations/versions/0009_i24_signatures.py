"""Signatures: each sealed bundle's DSSE envelope, a candidate's model signature (OpenSSF Model
Signing), and a decision's signed statement and signer.

Revision ID: 0009_i24
Revises: 0008_secret_key
Create Date: 2026-12-02 01:30:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0009_i24'
down_revision = '0008_secret_key'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'bundle_signatures',
        sa.Column('bundle_digest', sa.String(length=80), nullable=False),
        sa.Column('keyid', sa.String(length=80), nullable=False),
        sa.Column('envelope', sa.LargeBinary(), nullable=False),
        sa.Column('signed_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['bundle_digest'], ['bundles.digest']),
        sa.PrimaryKeyConstraint('bundle_digest'),
    )
    op.create_table(
        'model_signatures',
        sa.Column('candidate_id', sa.String(length=32), nullable=False),
        sa.Column('keyid', sa.String(length=80), nullable=False),
        sa.Column('digest', sa.String(length=80), nullable=False),
        sa.Column('signature', sa.LargeBinary(), nullable=False),
        sa.Column('signed_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['candidate_id'], ['candidates.id']),
        sa.PrimaryKeyConstraint('candidate_id'),
    )
    with op.batch_alter_table('decisions') as batch:
        batch.add_column(sa.Column('envelope', sa.LargeBinary(), nullable=True))
        batch.add_column(sa.Column('signer', sa.String(length=80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('decisions') as batch:
        batch.drop_column('signer')
        batch.drop_column('envelope')
    op.drop_table('model_signatures')
    op.drop_table('bundle_signatures')
