"""Alembic's environment for the store's migrations: always run by `mmvet_core.store._migrate` on a connection it
opened (inside the transaction that holds the schema lock), never from an ``alembic.ini``."""
from alembic import context

from mmvet_core.store._schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata,
                  # SQLite alters a table by copying it: later migrations use op.batch_alter_table
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
