"""`db copy|info`: move a store to another database, or see what a database holds.

``db copy --from data/mmvet-grader.db --to postgresql://user:password@host/database`` copies every run, grade,
cached judge answer, budget count, leaderboard entry and judge check into an empty database and prints the rows
per table on both sides (exit 0 when every count matches, 1 when one does not, 2 for bad input: a source that
does not exist, a target that is not empty, a database that cannot be opened).
"""
from __future__ import annotations

import sys

from ..store import DATABASE_URL_VAR, Store, StoreError, store_exists
from ..store._copy import copy_store, count_rows
from ..store._migrate import current_revision, head_revision
from .common import default_db
from .parser import Command, option


def cmd_db(args) -> int:
    try:
        return {"copy": _copy, "info": _info}[args.db_command](args)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _copy(args) -> int:
    if not store_exists(args.source):
        print(f"error: no database at {args.source}", file=sys.stderr)
        return 2
    source = Store(args.source)
    try:
        target = Store(args.target)
    except StoreError:
        source.close()
        raise
    try:
        print(f"copying {source.path} ({source.backend}) -> {target.path} ({target.backend})")
        counts = copy_store(source, target, progress=lambda table, n: print(f"  {table}: {n} rows", flush=True))
    finally:
        source.close()
        target.close()
    width = max(len(c.table) for c in counts)
    print(f"\n{'table':<{width}}  {'source':>9}  {'target':>9}")
    for c in counts:
        print(f"{c.table:<{width}}  {c.source:>9}  {c.target:>9}{'' if c.ok else '  MISMATCH'}")
    bad = [c.table for c in counts if not c.ok]
    if bad:
        print(f"error: the row counts differ in {', '.join(bad)}", file=sys.stderr)
        return 1
    print(f"every row copied: {sum(c.source for c in counts)} rows in {len(counts)} tables")
    return 0


def _info(args) -> int:
    location = args.db or default_db()
    if not store_exists(location):
        print(f"error: no database at {location}", file=sys.stderr)
        return 2
    store = Store(location)
    try:
        with store._tx(write=False) as conn:
            revision = current_revision(conn)
        counts = count_rows(store)
    finally:
        store.close()
    print(f"database: {store.path} ({store.backend})\nschema revision: {revision} (this release: {head_revision()})")
    for table, n in counts.items():
        print(f"  {table}: {n}")
    return 0


DB = Command("db", "the database: copy the SQLite file into PostgreSQL, see what a database holds",
             run=cmd_db, subcommand_dest="db_command", subcommands=(
    Command("copy", "copy every row of a database into an empty one (e.g. SQLite -> PostgreSQL), counting the rows "
                    "of each table on both sides", (
        option("--from", dest="source", required=True,
               help="the database to copy: a SQLite file (data/mmvet-grader.db) or a database URL"),
        option("--to", dest="target", required=True,
               help="an empty database: postgresql://user:password@host:port/database (or a new SQLite file)"))),
    Command("info", "which database the grader uses, its schema revision and rows per table", (
        option("--db", default=None, help=f"a SQLite file or a database URL (default: ${DATABASE_URL_VAR}, "
                                          "else the data folder's mmvet-grader.db)"),)),
))
