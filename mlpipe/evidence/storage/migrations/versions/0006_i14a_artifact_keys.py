"""Artifacts by root-relative key: ``artifacts.key`` (``blake3/c1/<hex>/data``), resolved by
each run against its own artifact root, so no run is pointed at another user's folder.

Existing rows whose location is an artifact root's entry for their digest (whoever's root it
was) get that entry's key; their ``location`` is kept as it was, since sealed bundles name it.

Revision ID: 0006_i14a
Revises: 0005_i16
Create Date: 2026-12-01 02:30:00
"""
import re

import sqlalchemy as sa
from alembic import op

revision = '0006_i14a'
down_revision = '0005_i16'
branch_labels = None
depends_on = None

# mlpipe.evidence.roots.KEY, as it was when this migration was written
_KEY = re.compile(r"(?:^|/)((?P<algo>[a-z0-9]+)/(?P<h2>[0-9a-f]{2})/(?P<hex>[0-9a-f]{16,})"
                  r"/(?P<name>[^/]+))/?$")


def _key(location, digest):
    found = _KEY.search((location or "").replace("\\", "/"))
    if found is None or f"{found['algo']}:{found['hex']}" != digest:
        return None
    return found.group(1) if found["hex"][:2] == found["h2"] else None


def upgrade() -> None:
    op.add_column('artifacts', sa.Column('key', sa.Text(), nullable=True))
    artifacts = sa.table('artifacts', sa.column('id', sa.Integer), sa.column('digest', sa.String),
                         sa.column('location', sa.Text), sa.column('key', sa.Text))
    conn = op.get_bind()
    last = -1
    while True:
        rows = conn.execute(sa.select(artifacts.c.id, artifacts.c.digest, artifacts.c.location)
                            .where(artifacts.c.id > last).order_by(artifacts.c.id)
                            .limit(5000)).all()
        if not rows:
            break
        last = rows[-1].id
        keyed = [{"i": r.id, "k": k} for r in rows if (k := _key(r.location, r.digest))]
        if keyed:
            conn.execute(artifacts.update().where(artifacts.c.id == sa.bindparam("i"))
                         .values(key=sa.bindparam("k")), keyed)


def downgrade() -> None:
    with op.batch_alter_table('artifacts') as batch:
        batch.drop_column('key')
