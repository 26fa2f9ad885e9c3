"""Copy a whole store into an empty one: a host moving from the SQLite file to PostgreSQL loses nothing.

Both databases are opened as stores first (so both are at this release's schema: a SQLite file of an earlier
release is upgraded in place, as the app would). The source is read under its write lock (SQLite: nobody writes
while it is read, so the copy is one consistent moment); the target is written in a single transaction (a copy
that fails leaves it empty). Rows are counted per table on both sides afterwards.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sqlalchemy as sa

from . import _schema as t
from ._records import StoreError

#: Rows sent to the target per statement.
CHUNK = 1000


@dataclass(frozen=True)
class TableCount:
    table: str
    source: int
    target: int

    @property
    def ok(self) -> bool:
        return self.source == self.target


def count_rows(store) -> dict[str, int]:
    """Rows per table of the schema."""
    with store._tx(write=False) as conn:
        return {table.name: int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar())
                for table in t.metadata.sorted_tables}


def copy_store(source, target, *, progress: Callable[[str, int], None] | None = None) -> list[TableCount]:
    """Copy every row of every table of `source` (a `Store`) into `target` (a `Store` holding nothing yet but its
    own id, which becomes the source's: it is the same database, moved). Returns the rows per table counted on
    both sides after the copy; `progress(table, rows)` is called after each table. Raises `StoreError` when the
    target holds anything, or when a row cannot be written (nothing is then kept in the target)."""
    if source.path == target.path:
        raise StoreError("the source and the target are the same database")
    held = {name: n for name, n in count_rows(target).items() if n and name != t.meta.name}
    if held:
        raise StoreError("the target database is not empty (" + ", ".join(f"{n} rows in {name}"
                         for name, n in held.items()) + "): copy into a new, empty database")
    try:
        with source._tx(lock="copy", write=False) as src, target._tx(lock="copy") as dst:
            for table in t.metadata.sorted_tables:
                insert = (_replace_meta(target, table) if table is t.meta else sa.insert(table))
                n = 0
                result = src.execute(sa.select(table).execution_options(yield_per=CHUNK))
                for chunk in result.partitions():
                    dst.execute(insert, [dict(r._mapping) for r in chunk])
                    n += len(chunk)
                if progress:
                    progress(table.name, n)
    except StoreError as e:
        raise StoreError(f"nothing was copied: {e}") from e
    before, after = count_rows(source), count_rows(target)
    return [TableCount(name, before[name], after[name]) for name in before]


def _replace_meta(target, table: sa.Table):
    insert = target._backend.insert(table)
    return insert.on_conflict_do_update(index_elements=["key"], set_={"value": insert.excluded.value})
