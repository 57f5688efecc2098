"""Races (issue 37): one decision per bundle, and promotion claims.

One decision per bundle: a unique index on decisions.bundle_digest, so a second decision
citing a bundle (which the first one's seal superseded) cannot be recorded, however many
reviewers race (issue 37).

A store that already holds two decisions on one bundle (recorded before this rule) keeps them:
they are evidence, and `mlpipe evidence C --verify` reports each pair (MP715). The index then
covers every decision recorded after the newest of them (a partial index, on PostgreSQL and
SQLite alike), so the rule holds from now on.

Promotion claims: a row per promotion under way (candidate, registry, target, name), recorded
before the registry is written and removed with the promotion's record.

Revision ID: 0012_i37_races
Revises: 0011_promotions
Create Date: 2026-12-06 16:00:00
"""
import sqlalchemy as sa
from alembic import op

revision = '0012_i37_races'
down_revision = '0011_promotions'
branch_labels = None
depends_on = None


def upgrade() -> None:
    doubled = op.get_bind().execute(sa.text(
        "SELECT max(id) FROM decisions WHERE bundle_digest IN (SELECT bundle_digest FROM "
        "decisions GROUP BY bundle_digest HAVING count(*) > 1)")).scalar()
    where = None if doubled is None else sa.text(f"id > {int(doubled)}")
    op.create_index('uq_decisions_bundle', 'decisions', ['bundle_digest'], unique=True,
                    postgresql_where=where, sqlite_where=where)
    op.create_table(
        'promotion_claims',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('candidate_id', sa.String(length=32), nullable=False),
        sa.Column('registry', sa.String(length=20), nullable=False),
        sa.Column('target', sa.String(length=500), nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('host', sa.String(length=255), nullable=False),
        sa.Column('pid', sa.Integer(), nullable=False),
        sa.Column('pid_started', sa.String(length=40), nullable=True),
        sa.Column('claimed_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['candidate_id'], ['candidates.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('candidate_id', 'registry', 'target', 'name',
                            name='uq_promotion_claims'),
    )


def downgrade() -> None:
    op.drop_table('promotion_claims')
    op.drop_index('uq_decisions_bundle', table_name='decisions')
