"""What the store hands out: its typed records, its one exception and run ids (no database code here)."""
from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any, Mapping


class StoreError(Exception):
    """The database cannot be read or written; the message says what is wrong (no server path or address in it:
    it may be shown to visitors)."""


def new_id(nbytes: int) -> str:
    """An unguessable id of `nbytes` random bytes, URL-safe base64, that never starts with ``-`` (such an id, 1 in
    64 before, was read as an option by the command line: ``leaderboard publish -x… --name …`` failed). Drawn again
    when it would: the ids left are still uniform over their kind, with ``nbytes * 8 - 0.03`` bits."""
    while True:
        token = secrets.token_urlsafe(nbytes)
        if not token.startswith("-"):
            return token


def new_run_id() -> str:
    """An unguessable run id: 144 random bits, URL-safe, never starting with ``-`` (`new_id`)."""
    return new_id(18)


@dataclass
class RunRecord:
    id: str
    created_at: float
    updated_at: float
    model_name: str
    benchmark: dict
    n_runs: int
    judge: dict
    status: str
    message: str
    results_format: str
    predictions: dict[str, str]
    owner: str
    fingerprint: str


@dataclass
class GradeRow:
    run_id: str
    sample_id: str
    run_index: int
    status: str
    score: float | None
    content: str | None
    judge_model: str | None
    attempts: list[dict]
    error: str | None
    flags: list[str]
    updated_at: float


def run_record(r: Mapping[str, Any]) -> RunRecord:
    return RunRecord(id=r["id"], created_at=r["created_at"], updated_at=r["updated_at"],
                     model_name=r["model_name"], benchmark=json.loads(r["benchmark"]), n_runs=r["n_runs"],
                     judge=json.loads(r["judge"]), status=r["status"], message=r["message"],
                     results_format=r["results_format"], predictions=json.loads(r["predictions"]),
                     owner=r["owner"], fingerprint=r["fingerprint"])


def grade_row(r: Mapping[str, Any]) -> GradeRow:
    return GradeRow(run_id=r["run_id"], sample_id=r["sample_id"], run_index=r["run_index"], status=r["status"],
                    score=r["score"], content=r["content"], judge_model=r["judge_model"],
                    attempts=json_list(r["attempts"]), error=r["error"], flags=json_list(r["flags"]),
                    updated_at=r["updated_at"])


def json_list(text: str) -> list:
    return [] if text == "[]" else json.loads(text)
