"""`judge-check` and `judges`: after gpt-4-0613, check a candidate judge against the reference sets with official
grades (`judgecheck`), and list the judges an endpoint serves with their shutdown dates and checks (`endpoints`)."""
from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

from ..judging.endpoints import format_judges, judge_rows, list_judge_models, today_utc
from ..judging.grading import DEFAULT_CONCURRENCY
from ..judging.judge import DEFAULT_JUDGE_MODEL
from ..successors.judgecheck import (call_count, distinct_prompts, format_check, load_manifest, load_references,
                                     run_judge_check, stored_check)
from ..store import store_exists
from ..scores.terminal import fit
from .common import DEFAULT_DB, RETIRED, checked_judge, default_db, judge_settings, open_store, retirement_note_of
from .parser import Command, UsageError, option


def say(text: str) -> None:
    """Print prose wrapped at the report width (`terminal.fit`)."""
    print(fit(text))


def cmd_judge_check(args) -> int:
    if args.export and args.import_source:
        raise UsageError("--export and --import: one at a time")
    if args.import_source:
        return cmd_import_check(args)
    settings, key = judge_settings(args)
    store = open_store(args.db or default_db())
    if args.export:
        return cmd_export_check(args, store, settings)
    try:
        refs = load_references(which=args.references)
    except ValueError as e:
        raise UsageError(str(e)) from e
    if args.resamples < 100:
        raise UsageError("--resamples must be at least 100")
    others = [s.model for s in load_manifest() if s.model not in {r.model for r in refs}]
    n, distinct = call_count(refs=refs), distinct_prompts(refs=refs)
    say(f"Judge check: {settings.model} grades {len(refs)} reference sets ({', '.join(r.model for r in refs)}) "
          f"with the official prompt: {n} judge calls at 1 run ({distinct} distinct prompts are asked, identical "
          f"ones once; more calls if it answers something unparsable: the official re-asks). Answers already "
          f"stored in {store.path} are reused for free."
          + (" (The keyword baseline runs offline: no paid call.)" if settings.provider == "baseline" else "")
          + (f" Not included (--references all adds up to {218 * len(others)} calls): {', '.join(others)}."
             if others else ""))
    settings = checked_judge(settings, key)        # never spend on a judge the endpoint no longer serves
    note = retirement_note_of(settings)
    if note:
        say(f"Warning: {note}; its check and its grades stay stored and viewable after that date.")
    held = [m for m in (getattr(stored_check(store, settings), "models", None) or []) if m not in
            {r.model for r in refs}]
    if held:
        say(f"This judge's check already holds {', '.join(held)}: they stay in it (a check grows; their answers "
              "are stored, no call).")
    result = asyncio.run(_judge_check(store, settings, key, args.concurrency, n, refs, args.resamples, args.seed))
    calls = ("no judge calls (the keyword baseline runs offline)" if settings.provider == "baseline" else
             f"Judge calls: {result.calls} made, {result.cached} reused (grades already stored, or answered from the "
             "store).")
    say(f"\n{calls}")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(result.created_at))
    say(f"Check {result.check_id} of {when}" + (": unchanged (same reference sets, same grades), kept as it was."
                                                   if result.unchanged else "."))
    print(format_check(result, wide=args.wide))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "judge-check.json").write_text(json.dumps(result.to_dict(), indent=2), encoding="utf-8")
        print(f"wrote {out / 'judge-check.json'}")
    return 0 if result.n_graded == result.n_expected else 1


def cmd_export_check(args, store, settings) -> int:
    """`judge-check --export DIR`: the judge's check here as a dataset folder (`checkshare.export_check`)."""
    from ..successors.checkshare import CheckShareError, export_check

    try:
        path, n = export_check(store, settings, args.export, host_name=args.host_name or "")
    except CheckShareError as e:
        raise UsageError(str(e)) from e
    say(f"Exported the check of {settings.model}: {n} reference prompts with their judge answers and grades "
          f"to {path} (and README.md; no key, no private host name).")
    say("Another host imports it with: python -m mmvet_core judge-check --judge-model "
          f"{settings.model} --import {Path(args.export)}")
    return 0


def cmd_import_check(args) -> int:
    """`judge-check --import SOURCE`: an exported check, verified here before it is trusted
    (`checkshare.import_check`); without a key it is stored unverified."""
    from ..successors.checkshare import CheckShareError, import_check, read_export, sample_prompts, parse_rows

    if args.baseline:
        raise UsageError("--import needs --judge-model (the judge the check is of), not --baseline")
    try:
        settings, key = judge_settings(args)
    except UsageError:
        if args.judge_model is None:
            raise
        from ..judging.judge import JudgeSettings
        settings, key = JudgeSettings(model=args.judge_model, max_tokens=args.max_tokens), None
    verify = not args.no_verify and (key is not None or settings.base_url is not None)
    store = open_store(args.db or default_db())
    if verify:
        if args.verify_seed is None:          # drawn now: an exporter must not know which prompts are re-graded
            import secrets
            args.verify_seed = secrets.randbelow(2 ** 31)
        settings = checked_judge(settings, key)
        try:
            _, _, exported = parse_rows(read_export(args.import_source), settings.model)
        except CheckShareError as e:
            raise UsageError(str(e)) from e
        n = len(sample_prompts(exported, share=args.verify_share, least=args.verify_min, seed=args.verify_seed))
        say(f"Importing a check of {settings.model}: {n} of its prompts are graded again here with your judge "
              f"to verify it ({args.verify_share:.0%}, at least {args.verify_min}; seed {args.verify_seed}).")
    else:
        say("Warning: no judge key (or --no-verify): the check is imported WITHOUT verification and stored as "
              "unverified; every estimate resting on it says so.")
    try:
        outcome = asyncio.run(import_check(store, settings, key, args.import_source, verify_prompts=verify,
                                           share=args.verify_share, least=args.verify_min, seed=args.verify_seed,
                                           resamples=args.resamples, concurrency=args.concurrency))
    except CheckShareError as e:
        print(f"Import refused: {e}", file=sys.stderr)
        return 1
    if outcome.verification is not None:
        say(f"Verified: {outcome.verification.text()}.")
    say(f"Imported as check {outcome.result.check_id} of {settings.model} at this endpoint "
          f"({'verified' if outcome.verification else 'UNVERIFIED'}; from {outcome.facts.get('host')}, check "
          f"{str(outcome.facts.get('check_id'))[:8]} of {outcome.facts.get('date')}).")
    print(format_check(outcome.result))
    return 0


async def _judge_check(store, settings, key, concurrency, total, refs, resamples, seed):
    from tqdm import tqdm

    bar = tqdm(total=total, unit="grade", desc="Checking", file=sys.stderr)
    try:
        def on_grade(row):
            bar.update(1)
            if row.status == "error":
                bar.write(f"{row.sample_id}: {row.error}")
        return await run_judge_check(store, settings, key, concurrency=concurrency, on_grade=on_grade, refs=refs,
                                     resamples=resamples, seed=seed)
    finally:
        bar.close()


def cmd_judges(args) -> int:
    settings, key = judge_settings(args)
    settings = replace(settings, timeout=args.timeout)
    where = settings.base_url or "https://api.openai.com/v1"
    models = asyncio.run(list_judge_models(settings, key, timeout=args.timeout))
    db = args.db or default_db()
    store = open_store(db) if store_exists(db) else None
    today = today_utc()
    rows = judge_rows(models, settings, today, store) if models.known else []
    print(format_judges(rows, models, where, today))
    return 0 if models.known else 1


JUDGE_CHECK = Command("judge-check", "grade the bundled reference sets (model outputs with real official "
                                     "GPT-4-0613 grades) with a candidate judge and report how far it is, "
                                     "with 95%% intervals", (
    option("--judge-model", default=None,
           help=f"candidate judge model (default {DEFAULT_JUDGE_MODEL}: {RETIRED}; `judges` lists what your "
                "endpoint serves)"),
    option("--base-url", default=None, help="its OpenAI-compatible base URL (vLLM, Ollama, ...)"),
    option("--azure", action="store_true", help="use Azure OpenAI (as for grade)"),
    option("--baseline", action="store_true", help="check the offline keyword baseline itself"),
    option("--max-tokens", type=int, default=3, help="judge answer limit (official: 3)"),
    option("--timeout", type=float, default=60.0, help="seconds per judge call before a retry"),
    option("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="ceiling of judge calls in flight"),
    option("--rate-limit-wait", type=float, default=1800.0, help="as for grade"),
    option("--db", default=None, help=f"SQLite database (default {DEFAULT_DB}, or $MMVET_DATA_DIR)"),
    option("--references", default="default",
           help="reference sets to grade: 'default' (those marked default in assets/reference/"
                "references.json), 'all', or names joined by commas; each set costs up to 218 judge calls"),
    option("--resamples", type=int, default=10_000, help="bootstrap resamples of the intervals (default 10000)"),
    option("--seed", type=int, default=0, help="bootstrap seed (default 0)"),
    option("--out", default=None, help="folder for judge-check.json (the full result)"),
    option("--export", default=None, metavar="DIR",
           help="write this judge's check here as a dataset folder (datasets.load_dataset reads it) instead of "
                "checking: every reference prompt's judge answers and grades, no key, no private host name"),
    option("--host-name", default=None, help="with --export: the name estimates give this host (default: "
                                             "'an unnamed host')"),
    option("--import", dest="import_source", default=None, metavar="SOURCE",
           help="import an exported check (a folder, or a Hugging Face dataset owner/name): a share of its "
                "prompts is graded again here to verify it; without a key it is stored unverified"),
    option("--verify-share", type=float, default=0.05, help="with --import: share of the prompts re-graded "
                                                            "(default 0.05)"),
    option("--verify-min", type=int, default=60, help="with --import: at least this many (default 60)"),
    option("--verify-seed", type=int, default=None,
           help="with --import: the seed of the pick (default: drawn at random and printed)"),
    option("--no-verify", action="store_true", help="with --import: store it unverified without any call"),
    option("--wide", action="store_true", help="add each column's shift per reference model (a table wider "
                                               "than 100 columns)"),
), run=cmd_judge_check)

JUDGES = Command("judges", "the chat models your endpoint serves, each with its shutdown date and, "
                           "when checked, its Δ̄ and total shift to the official judge", (
    option("--base-url", default=None, help="OpenAI-compatible base URL (default OPENAI_BASE_URL or OpenAI)"),
    option("--azure", action="store_true", help="Azure OpenAI: its deployments, where the resource lists them"),
    option("--db", default=None, help=f"SQLite database with stored judge checks (default {DEFAULT_DB})"),
    option("--timeout", type=float, default=15.0, help="seconds the model list may take (default 15)"),
), run=cmd_judges, defaults=dict(judge_model=DEFAULT_JUDGE_MODEL, baseline=False, max_tokens=3, rate_limit_wait=1800.0))
