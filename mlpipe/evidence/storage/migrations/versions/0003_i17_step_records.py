"""Step records: what each step's runtime recorded (failure layer, validation, observed reads
and writes, launch decisions), and the per-file digests of artifacts whose files are not here
to hash (Azure ML outputs).

Revision ID: 0003_i17
Revises: 0002
Create Date: 2026-12-02 10:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0003_i17'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('step_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('record', sa.JSON(), nullable=True))
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('files', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('artifacts', schema=None) as batch_op:
        batch_op.drop_column('files')
    with op.batch_alter_table('step_runs', schema=None) as batch_op:
        batch_op.drop_column('record')
