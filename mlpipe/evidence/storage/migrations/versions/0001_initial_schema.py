"""The initial evidence-store schema: every table of mlpipe.evidence.models.

Revision ID: 0001
Revises: 
Create Date: 2026-11-29 19:28:43.351161
"""
import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('artifacts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('digest', sa.String(length=80), nullable=False),
    sa.Column('kind', sa.String(length=40), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('file_count', sa.Integer(), nullable=False),
    sa.Column('location', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('digest')
    )
    op.create_table('code_revisions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('commit', sa.String(length=64), nullable=False),
    sa.Column('dirty', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('commit', 'dirty')
    )
    op.create_table('component_versions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('spec_digest', sa.String(length=80), nullable=False),
    sa.Column('code_digest', sa.String(length=80), nullable=False),
    sa.Column('spec', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('spec_digest')
    )
    op.create_table('environments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('digest', sa.String(length=80), nullable=False),
    sa.Column('mutable', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name', 'version', 'digest')
    )
    op.create_table('pipeline_specs',
    sa.Column('digest', sa.String(length=80), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('spec', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('digest')
    )
    with op.batch_alter_table('pipeline_specs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_pipeline_specs_name'), ['name'], unique=False)

    op.create_table('snapshots',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('digest', sa.String(length=80), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('file_count', sa.Integer(), nullable=False),
    sa.Column('reference', sa.Text(), nullable=False),
    sa.Column('mutable', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('digest', 'reference')
    )
    with op.batch_alter_table('snapshots', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_snapshots_digest'), ['digest'], unique=False)

    op.create_table('runs',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('pipeline_name', sa.String(length=200), nullable=False),
    sa.Column('pipeline_digest', sa.String(length=80), nullable=False),
    sa.Column('target', sa.String(length=40), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('started_at', sa.DateTime(), nullable=False),
    sa.Column('finished_at', sa.DateTime(), nullable=True),
    sa.Column('user', sa.String(length=200), nullable=True),
    sa.Column('host', sa.String(length=255), nullable=True),
    sa.Column('pid', sa.Integer(), nullable=True),
    sa.Column('pid_started', sa.String(length=40), nullable=True),
    sa.Column('code_revision_id', sa.Integer(), nullable=True),
    sa.Column('options', sa.JSON(), nullable=False),
    sa.Column('message', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['code_revision_id'], ['code_revisions.id'], ),
    sa.ForeignKeyConstraint(['pipeline_digest'], ['pipeline_specs.digest'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index('ix_runs_pipeline_started', ['pipeline_name', 'started_at'], unique=False)
        batch_op.create_index('ix_runs_status', ['status'], unique=False)

    op.create_table('candidates',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=True),
    sa.Column('model_artifact_id', sa.Integer(), nullable=False),
    sa.Column('evaluation_artifact_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['evaluation_artifact_id'], ['artifacts.id'], ),
    sa.ForeignKeyConstraint(['model_artifact_id'], ['artifacts.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('candidates', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_candidates_run_id'), ['run_id'], unique=False)

    op.create_table('run_inputs',
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('snapshot_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.ForeignKeyConstraint(['snapshot_id'], ['snapshots.id'], ),
    sa.PrimaryKeyConstraint('run_id', 'name')
    )
    with op.batch_alter_table('run_inputs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_run_inputs_snapshot_id'), ['snapshot_id'], unique=False)

    op.create_table('step_runs',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('step', sa.String(length=300), nullable=False),
    sa.Column('component_version_id', sa.Integer(), nullable=False),
    sa.Column('environment_id', sa.Integer(), nullable=True),
    sa.Column('compute', sa.JSON(), nullable=False),
    sa.Column('topology', sa.JSON(), nullable=False),
    sa.Column('cache_key', sa.String(length=80), nullable=True),
    sa.Column('key_material', sa.JSON(), nullable=True),
    sa.Column('cacheable', sa.Boolean(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('reused_from_id', sa.String(length=32), nullable=True),
    sa.Column('started_at', sa.DateTime(), nullable=False),
    sa.Column('finished_at', sa.DateTime(), nullable=True),
    sa.Column('log_path', sa.Text(), nullable=True),
    sa.Column('message', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['component_version_id'], ['component_versions.id'], ),
    sa.ForeignKeyConstraint(['environment_id'], ['environments.id'], ),
    sa.ForeignKeyConstraint(['reused_from_id'], ['step_runs.id'], ),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('step_runs', schema=None) as batch_op:
        batch_op.create_index('ix_step_runs_key_status', ['cache_key', 'status'], unique=False)
        batch_op.create_index(batch_op.f('ix_step_runs_reused_from_id'), ['reused_from_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_step_runs_run_id'), ['run_id'], unique=False)
        batch_op.create_index('ix_step_runs_step', ['step', 'started_at'], unique=False)

    op.create_table('metrics',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('step_run_id', sa.String(length=32), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('value', sa.Float(), nullable=False),
    sa.Column('scope', sa.String(length=10), nullable=False),
    sa.Column('rank', sa.Integer(), nullable=True),
    sa.Column('population', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['step_run_id'], ['step_runs.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('metrics', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_metrics_step_run_id'), ['step_run_id'], unique=False)

    op.create_table('step_artifacts',
    sa.Column('step_run_id', sa.String(length=32), nullable=False),
    sa.Column('direction', sa.String(length=6), nullable=False),
    sa.Column('port', sa.String(length=200), nullable=False),
    sa.Column('artifact_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['artifact_id'], ['artifacts.id'], ),
    sa.ForeignKeyConstraint(['step_run_id'], ['step_runs.id'], ),
    sa.PrimaryKeyConstraint('step_run_id', 'direction', 'port')
    )
    with op.batch_alter_table('step_artifacts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_step_artifacts_artifact_id'), ['artifact_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('step_artifacts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_step_artifacts_artifact_id'))

    op.drop_table('step_artifacts')
    with op.batch_alter_table('metrics', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_metrics_step_run_id'))

    op.drop_table('metrics')
    with op.batch_alter_table('step_runs', schema=None) as batch_op:
        batch_op.drop_index('ix_step_runs_step')
        batch_op.drop_index(batch_op.f('ix_step_runs_run_id'))
        batch_op.drop_index(batch_op.f('ix_step_runs_reused_from_id'))
        batch_op.drop_index('ix_step_runs_key_status')

    op.drop_table('step_runs')
    with op.batch_alter_table('run_inputs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_run_inputs_snapshot_id'))

    op.drop_table('run_inputs')
    with op.batch_alter_table('candidates', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_candidates_run_id'))

    op.drop_table('candidates')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_status')
        batch_op.drop_index('ix_runs_pipeline_started')

    op.drop_table('runs')
    with op.batch_alter_table('snapshots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_snapshots_digest'))

    op.drop_table('snapshots')
    with op.batch_alter_table('pipeline_specs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_pipeline_specs_name'))

    op.drop_table('pipeline_specs')
    op.drop_table('environments')
    op.drop_table('component_versions')
    op.drop_table('code_revisions')
    op.drop_table('artifacts')
