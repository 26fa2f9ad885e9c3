"""Provenance of a leaderboard entry: how its grades came to exist, and whether anyone this server trusts vouches
for the judge they name (pure functions over a run's record and grades, plus one store write).

A grade is **graded here** when this server called a judge for it (or the offline keyword baseline computed it),
and **imported** when it came from a file (``Open a grade file``, ``grade --import-grades``): a file can claim
any judge and any score, so an imported grade's judge is *claimed*, never verified. A graded-here grade is as
trustworthy as the endpoint that answered: this server's own judge endpoint and the public OpenAI API
(`KNOWN_PROVIDERS`) answer with the model they name; an endpoint a visitor brings can answer anything under any
model name. So an entry's judge is **verified** when

* every grade was graded here, on endpoints this server trusts (``verified_by = "server"``), or
* the host marked it verified after looking at it (``verified_by = "host"``, CLI ``leaderboard verify`` or the
  page's host control behind ``MMVET_HOST_SECRET``); a new version of the entry starts unverified again.

Only verified entries are ranked (`entries.rank_key`); the others are listed with their scores, unranked,
and marked everywhere (the board, the card, the downloads, the API and MCP) with `label`: "imported, judge not
verified", "graded on HOST, judge not verified".

The record is a small JSON object frozen with each entry version (``meta["provenance"]``)::

    {"source": "graded" | "imported" | "unknown", "judge": "gpt-4-0613", "endpoints": ["api.openai.com"],
     "served_by": ["gpt-4-0613"], "imported_from": "official grade JSON", "imported_grades": 0,
     "verified_by": "server" | "host" | "", "verified_at": 1733300000.0, "restored": false}

``unknown`` is a version stored before provenance was recorded. ``restored`` marks a version read from a backup
without ``--trust``: its claims are the backup's, so it is unverified until the host verifies it.
"""
from __future__ import annotations

import time
from typing import Collection, Iterable
from urllib.parse import urlsplit

GRADED, IMPORTED, UNKNOWN = "graded", "imported", "unknown"
SOURCES = (GRADED, IMPORTED, UNKNOWN)
BY_SERVER, BY_HOST = "server", "host"
VERIFIERS = ("", BY_SERVER, BY_HOST)
#: Endpoints whose answers carry the provider's own model name (their hosts, as `endpoint_netloc` writes them).
KNOWN_PROVIDERS = frozenset({"api.openai.com"})
OPENAI_PUBLIC_URL = "https://api.openai.com/v1"
OFFLINE = "offline"
#: A run's judge record holds ``"credential": VISITOR_CREDENTIAL`` when a visitor's own key graded (some of) it.
VISITOR_CREDENTIAL = "visitor"
#: The label of the paper's reference rows (their numbers are the official metric, as published).
PAPER_LABEL = "paper: official metric (gpt-4-0613, 5 runs)"


def endpoint_netloc(base_url: str | None) -> str:
    """``host[:port]`` of an endpoint URL, lower case, without credentials (``None``: the public OpenAI API).

    >>> endpoint_netloc("https://User:pw@API.OpenAI.com/v1"), endpoint_netloc(None), endpoint_netloc("http://127.0.0.1:8000/v1")
    ('api.openai.com', 'api.openai.com', '127.0.0.1:8000')
    """
    parts = urlsplit(base_url or OPENAI_PUBLIC_URL)
    host = (parts.hostname or "?").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{host}:{port}" if port else host


def run_endpoints(judge: dict) -> list[str]:
    """Every endpoint (``host[:port]``) that graded a run: the one it started on and any it was resumed on."""
    if judge.get("provider") == "baseline":
        return [OFFLINE]
    if judge.get("provider") == "imported":
        return []
    seen = [endpoint_netloc(judge.get("base_url"))]
    for netloc in judge.get("graded_on") or []:
        if isinstance(netloc, str) and netloc not in seen:
            seen.append(netloc)
    return seen


def note_endpoint(store, run_id: str, base_url: str | None) -> None:
    """Record that `run_id` is (also) graded on `base_url` (a resume on another endpoint than its first): its
    provenance then names every endpoint its grades came from."""
    run = store.get_run(run_id)
    if run is None or run.judge.get("provider") in ("baseline", "imported"):     # no endpoint grades those
        return
    netloc = endpoint_netloc(base_url)
    if netloc in run_endpoints(run.judge):
        return
    store.update_run_judge(run_id, {**run.judge, "graded_on": [*(run.judge.get("graded_on") or []), netloc]})


def note_visitor_credential(store, run_id: str) -> None:
    """Record that `run_id` is (also) graded with a visitor's own key (a resume with it): its answers are then not
    all the server's judge's, whatever endpoint answered (`run_provenance`, `judgecheck.run_check`)."""
    run = store.get_run(run_id)
    if run is not None and run.judge.get("credential") != VISITOR_CREDENTIAL:
        store.update_run_judge(run_id, {**run.judge, "credential": VISITOR_CREDENTIAL})


def run_provenance(view, *, trusted: Collection[str] | None) -> dict:
    """The provenance record (module docstring) of a finished run (`runs.RunView`). `trusted` holds the endpoints
    (``host[:port]``) this server trusts besides `KNOWN_PROVIDERS`; None trusts every endpoint (the host's own CLI
    publishing: the host ran it)."""
    judge = view.run.judge
    grades = list(view.grades.values())
    n_imported = sum(1 for g in grades if any(isinstance(a, dict) and a.get("imported") for a in g.attempts or []))
    served = sorted({str(g.judge_model) for g in grades if g.judge_model})[:8]
    record = {"source": GRADED, "judge": str(view.judge_name), "endpoints": run_endpoints(judge),
              "served_by": served, "imported_from": "", "imported_grades": n_imported, "verified_by": "",
              "verified_at": None, "restored": False}
    if judge.get("provider") == "imported" or n_imported:
        record["source"] = IMPORTED
        record["judge"] = str(view.judge_text)
        record["imported_from"] = str(judge.get("imported_from") or "a grade file")
        return record
    # the server's own endpoint is trusted for answers the server's key got; a visitor's key at the same address
    # may reach another deployment behind it (a gateway routes by key), so it proves nothing there
    own_key = judge.get("credential") == VISITOR_CREDENTIAL
    if trusted is None or all(e == OFFLINE or e in KNOWN_PROVIDERS or (e in trusted and not own_key)
                              for e in record["endpoints"]):
        record["verified_by"] = BY_SERVER
    return record


def is_verified(prov: dict | None) -> bool:
    """Whether an entry's judge is vouched for (by this server's grading or by the host)."""
    return bool(prov) and prov.get("verified_by") in (BY_SERVER, BY_HOST)


def _hosts(endpoints: Iterable[str], verified_by: str = "", other: str = "a visitor's endpoint") -> str:
    shown = []
    for e in endpoints:
        name = shown_endpoint(e, verified_by, other)
        if name not in shown:
            shown.append(name)
    return ", ".join(shown) or "?"


def shown_endpoint(netloc: str, verified_by: str = "", other: str = "a visitor's endpoint") -> str:
    """An endpoint as anyone may read it (issue 33): the offline baseline and a known provider by name; any other
    address never (a visitor's host names are theirs, the server's gateway is the host's): this server's own
    judge when the server's grading vouches for it, else `other` ("a visitor's endpoint").

    >>> shown_endpoint("api.openai.com"), shown_endpoint("10.0.0.7:8000", "server"), shown_endpoint("evil.example")
    ('api.openai.com', "this server's judge", "a visitor's endpoint")
    """
    host = netloc.split(":")[0] if netloc.count(":") == 1 else netloc
    if netloc == OFFLINE or host in KNOWN_PROVIDERS or netloc in KNOWN_PROVIDERS:
        return host
    return "this server's judge" if verified_by == BY_SERVER else other


def public_record(prov: dict | None) -> dict:
    """The provenance record as the API, MCP and the downloads show it: its endpoints by `shown_endpoint`."""
    out = dict(prov or {"source": UNKNOWN})
    if isinstance(out.get("endpoints"), list):
        out["endpoints"] = [shown_endpoint(str(e), str(out.get("verified_by") or "")) for e in out["endpoints"]]
    return out


def label(prov: dict | None) -> str:
    """What the board's provenance column, the card and the downloads say about an entry.

    >>> label({"source": "imported", "verified_by": ""})
    'imported, judge not verified'
    >>> label({"source": "graded", "endpoints": ["api.openai.com"], "verified_by": "server"})
    'graded here (api.openai.com)'
    >>> label({"source": "graded", "endpoints": ["evil.example"], "verified_by": ""})
    "graded on a visitor's endpoint, judge not verified"
    >>> label({"source": "graded", "endpoints": ["gateway.corp:8443"], "verified_by": "server"})
    "graded here (this server's judge)"
    """
    prov = prov or {}
    source, verified = prov.get("source", UNKNOWN), is_verified(prov)
    by_host = ", verified by the host" if prov.get("verified_by") == BY_HOST else ""
    if source == IMPORTED:
        return f"imported{by_host}" if verified else "imported, judge not verified"
    if source == GRADED:
        where = _hosts(prov.get("endpoints") or [], str(prov.get("verified_by") or ""))
        if where == OFFLINE:
            return "graded here (offline baseline)" + by_host
        if verified:
            return f"graded here ({where}){by_host}"
        if prov.get("restored"):
            where = _hosts(prov.get("endpoints") or [], "", other="another server's endpoint")
            return f"restored from a backup (graded on {where}), judge not verified"
        return f"graded on {where}, judge not verified"
    return f"provenance unknown{by_host}" if verified else "provenance unknown, judge not verified"


def mark_verified(prov: dict | None, verified: bool = True, *, at: float | None = None) -> dict:
    """The record with the host's verification set (or withdrawn: back to what the grading itself proves)."""
    prov = dict(prov or {"source": UNKNOWN})
    if verified:
        prov.update(verified_by=BY_HOST, verified_at=time.time() if at is None else at)
    elif prov.get("verified_by") == BY_HOST:
        prov.update(verified_by="", verified_at=None)
    return prov


def mark_restored(prov: dict | None) -> dict:
    """The record of a version restored from a backup the host did not vouch for: its claims stay visible, its
    verification (the backup's word) does not count."""
    prov = dict(prov or {"source": UNKNOWN})
    prov.update(restored=True, verified_by="", verified_at=None)
    return prov
