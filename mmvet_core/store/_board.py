"""The leaderboard's tables (`mmvet_core/board/`): entries, their frozen versions, publish counts."""
from __future__ import annotations

import json
import time

import sqlalchemy as sa

from . import _schema as t


class BoardFacet:
    def add_board_version(self, entry_id: str, *, run_id: str, owner_hash: str, name: str, link: str,
                          meta: dict, scores: dict, published_at: float | None = None,
                          version: int | None = None, published: bool = True, hidden: bool = False) -> int:
        """Store a new frozen version of an entry (creating the entry when new) and make it current; returns its
        version number (1 for a new entry; `version` forces one, for an import). One transaction under the
        board's write lock: two processes publishing the same entry get two versions."""
        now = time.time() if published_at is None else published_at
        e, v = t.board_entries, t.board_versions
        with self._tx(lock="board") as conn:
            exists = conn.execute(sa.select(e.c.version).where(e.c.id == entry_id)).first() is not None
            if version is None:
                version = int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(v.c.version), 0))
                                           .where(v.c.entry_id == entry_id)).scalar()) + 1
            insert = self._backend.insert(v).values(entry_id=entry_id, version=version, published_at=now,
                                                    meta=json.dumps(meta, ensure_ascii=False),
                                                    scores=json.dumps(scores))
            conn.execute(insert.on_conflict_do_update(
                index_elements=["entry_id", "version"],
                set_={"published_at": insert.excluded.published_at, "meta": insert.excluded.meta,
                      "scores": insert.excluded.scores}))
            if exists:
                conn.execute(sa.update(e).where(e.c.id == entry_id).values(
                    version=sa.case((e.c.version > version, e.c.version), else_=version), name=name, link=link,
                    published=int(published), updated_at=now))
            else:
                conn.execute(sa.insert(e).values(id=entry_id, run_id=run_id, owner_hash=owner_hash, name=name,
                                                 link=link, version=version, published=int(published),
                                                 hidden=int(hidden), created_at=now, updated_at=now))
        return version

    def board_entry(self, entry_id: str) -> dict | None:
        rows = self._rows(sa.select(t.board_entries).where(t.board_entries.c.id == entry_id))
        return rows[0] if rows else None

    def board_entry_for_run(self, run_id: str) -> dict | None:
        """The entry published from `run_id` (the latest one when several), or None."""
        e = t.board_entries
        rows = self._rows(sa.select(e).where(e.c.run_id == run_id).order_by(e.c.created_at.desc()).limit(1))
        return rows[0] if rows else None

    def board_entries(self, *, include_withdrawn: bool = False) -> list[dict]:
        """Every entry with its current version's frozen meta and scores (JSON text, decoded by the caller):
        published and not hidden ones only unless `include_withdrawn`."""
        e, v = t.board_entries, t.board_versions
        query = (sa.select(e, v.c.published_at, v.c.meta, v.c.scores)
                 .join(v, sa.and_(v.c.entry_id == e.c.id, v.c.version == e.c.version)).order_by(e.c.created_at))
        if not include_withdrawn:
            query = query.where(e.c.published == 1, e.c.hidden == 0)
        return self._rows(query)

    def board_heads(self, *, include_withdrawn: bool = False) -> list[dict]:
        """`board_entries` without the frozen copies (id, owner_hash, name, link, version, flags, updated_at): what
        changes without a new version, read on every refresh of the board (`board_book.BoardBook`)."""
        e = t.board_entries
        query = sa.select(e).order_by(e.c.created_at)
        if not include_withdrawn:
            query = query.where(e.c.published == 1, e.c.hidden == 0)
        return self._rows(query)

    def board_version(self, entry_id: str, version: int) -> dict | None:
        """One stored version (published_at, meta and scores as JSON text), or None."""
        v = t.board_versions
        rows = self._rows(sa.select(v).where(v.c.entry_id == entry_id, v.c.version == version))
        return rows[0] if rows else None

    def set_board_meta(self, entry_id: str, version: int, meta: dict) -> None:
        """Replace a version's meta (the host's verification is written into its provenance); the entry counts
        as changed (`board_stamp`)."""
        e, v = t.board_entries, t.board_versions
        with self._tx(lock="board") as conn:
            conn.execute(sa.update(v).where(v.c.entry_id == entry_id, v.c.version == version)
                         .values(meta=json.dumps(meta, ensure_ascii=False)))
            conn.execute(sa.update(e).where(e.c.id == entry_id).values(updated_at=time.time()))

    def board_versions(self, entry_id: str) -> list[dict]:
        v = t.board_versions
        return self._rows(sa.select(v).where(v.c.entry_id == entry_id).order_by(v.c.version))

    def update_board_entry(self, entry_id: str, **fields) -> None:
        allowed = {"name", "link", "published", "hidden"}
        assert fields and set(fields) <= allowed, fields
        values = {k: int(x) if k in ("published", "hidden") else x for k, x in fields.items()}
        self._exec(sa.update(t.board_entries).where(t.board_entries.c.id == entry_id)
                   .values(**values, updated_at=time.time()))

    def set_board_current(self, entry_id: str, version: int, *, published: bool, hidden: bool, name: str,
                          link: str) -> None:
        """Make `version` the entry's current one with these flags (an import restores them as exported)."""
        self._exec(sa.update(t.board_entries).where(t.board_entries.c.id == entry_id).values(
            version=version, published=int(published), hidden=int(hidden), name=name, link=link,
            updated_at=time.time()))

    def board_stamp(self) -> tuple:
        """Changes whenever anything on the board changes (a cache key for ranks and tables)."""
        e = t.board_entries.c
        r = self._query(sa.select(sa.func.count(), sa.func.coalesce(sa.func.max(e.updated_at), 0),
                                  sa.func.coalesce(sa.func.sum(e.version * 7 + e.published * 3 + e.hidden), 0)))[0]
        return (int(r[0]), float(r[1]), int(r[2]))

    def log_publish(self, visitor: str, at: float | None = None) -> None:
        self._exec(sa.insert(t.board_publishes).values(visitor=visitor, at=time.time() if at is None else at))

    def count_publishes(self, visitor: str, since: float) -> int:
        p = t.board_publishes.c
        self._exec(sa.delete(t.board_publishes).where(p.at < since - 86400))     # keep the table small
        return int(self._query(sa.select(sa.func.count()).where(p.visitor == visitor, p.at >= since))[0][0])
