"""Source texts: each component's source file as it was when its code digest was recorded,
kept once per code digest, so `show --why` and `diff` print what changed in the code.

Revision ID: 0010_i23b_source
Revises: 0009_i24
Create Date: 2026-12-02 02:15:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0010_i23b_source'
down_revision = '0009_i24'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'source_texts',
        sa.Column('code_digest', sa.String(length=80), nullable=False),
        sa.Column('file', sa.Text(), nullable=False),
        sa.Column('function', sa.String(length=400), nullable=True),
        sa.Column('line', sa.Integer(), nullable=True),
        sa.Column('text', sa.Text(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint('code_digest'),
    )


def downgrade() -> None:
    op.drop_table('source_texts')
