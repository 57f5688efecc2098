"""Alembic environment for the evidence store: runs on the connection the store hands it.

Run by ``mlpipe.evidence.storage.migrate.upgrade``; never import this module directly.
"""
from alembic import context

from mlpipe.evidence.storage.models import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
