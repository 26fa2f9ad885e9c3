"""The judge-answer cache (nothing paid for is asked twice) and Batch API submissions (`mmvet_core/judging/batch.py`)."""
from __future__ import annotations

import json
import time

import sqlalchemy as sa

from . import _schema as t
from ._records import new_run_id


class AnswersFacet:
    """Judge answers keyed by (judge fingerprint, sha256 of the prompt, temperature, k): the k-th run of an
    identical prompt under an identical judge configuration reuses the k-th stored answer."""

    def get_answer(self, fingerprint: str, prompt_sha: str, temperature: float, k: int) -> dict | None:
        rows = self._fast("get_answer", _get_answer, {
            "fingerprint": fingerprint, "prompt_sha": prompt_sha, "temperature": temperature, "k": k}, fetch=True)
        if not rows:
            return None
        content, model, prompt_tokens, completion_tokens, sent = rows[0]
        return {"content": content, "model": model, "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens, "sent": json.loads(sent)}

    def put_answer(self, fingerprint: str, prompt_sha: str, temperature: float, k: int, *, content: str | None,
                   model: str | None, prompt_tokens: int | None, completion_tokens: int | None,
                   sent: dict) -> None:
        """Commit one judge answer at once (durable as soon as this returns). The first stored answer wins: a
        racing duplicate never replaces what was paid for first."""
        self._fast("put_answer", lambda db: db.insert(t.judge_cache).on_conflict_do_nothing(), {
            "fingerprint": fingerprint, "prompt_sha": prompt_sha, "temperature": temperature, "k": k,
            "content": content, "model": model, "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens, "sent": json.dumps(sent), "created_at": time.time()})

    def cache_size(self) -> int:
        return int(self._query(sa.select(sa.func.count()).select_from(t.judge_cache))[0][0])

    # --- Batch API submissions ---------------------------------------------------------------------------
    def add_batch(self, run_id: str, round_: int, requests: dict) -> str:
        """Record a batch about to be submitted (before its file is uploaded): a restart then never submits the
        same calls twice. Returns our id of it."""
        bid, now = new_run_id(), time.time()
        self._exec(sa.insert(t.batches).values(id=bid, run_id=run_id, round=round_, status="submitting",
                                               requests=json.dumps(requests), created_at=now, updated_at=now))
        return bid

    def update_batch(self, bid: str, **fields) -> None:
        allowed = {"status", "input_file_id", "batch_id", "message"}
        assert set(fields) <= allowed, fields
        self._exec(sa.update(t.batches).where(t.batches.c.id == bid).values(**fields, updated_at=time.time()))

    def open_batches(self, run_id: str) -> list[dict]:
        """The run's batches still submitting or submitted (to resume after a restart), oldest first."""
        b = t.batches
        rows = self._rows(sa.select(b).where(b.c.run_id == run_id, b.c.status.in_(("submitting", "submitted")))
                          .order_by(b.c.created_at))
        return [{**r, "requests": json.loads(r["requests"])} for r in rows]

    def batches(self, run_id: str) -> list[dict]:
        b = t.batches
        rows = self._rows(sa.select(b).where(b.c.run_id == run_id).order_by(b.c.created_at))
        return [{**r, "requests": json.loads(r["requests"])} for r in rows]


def _get_answer(_db) -> sa.Select:
    c = t.judge_cache.c
    return sa.select(c.content, c.model, c.prompt_tokens, c.completion_tokens, c.sent).where(
        c.fingerprint == sa.bindparam("fingerprint"), c.prompt_sha == sa.bindparam("prompt_sha"),
        c.temperature == sa.bindparam("temperature"), c.k == sa.bindparam("k"))
