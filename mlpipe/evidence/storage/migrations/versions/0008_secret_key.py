"""Store keys: the per-store key of the keyed hashes that stand for Param[Secret] values.

Revision ID: 0008_secret_key
Revises: 0007_i12a
Create Date: 2026-12-01 06:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0008_secret_key'
down_revision = '0007_i12a'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'store_keys',
        sa.Column('name', sa.String(length=40), nullable=False),
        sa.Column('value', sa.String(length=128), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('name'),
    )


def downgrade() -> None:
    op.drop_table('store_keys')
