"""Reading runs, one facet of the service: a run as pages show it (`view`, shared by every page while the run
does not change), a visitor's list of runs, the run card, `status` (what a script polls), the version pages follow,
one sample's evidence, the downloads, and the form a run was started with. Reading never changes a run; the
caches here are dropped when a run changes or goes."""
from __future__ import annotations

import json
import logging
import shutil
import time
import zipfile
from dataclasses import replace
from pathlib import Path

from .. import __version__
from ..scores.graded import OFFICIAL_JUDGES
from ..runs.jobs import JobManager
from ..hosting.keeping import cut_note
from ..runs.lifecycle import RunView, export_run, load_run_view
from ..store import RunRecord, Store, StoreError
from .judges import Judges
from .limits import HostLimits
from .records import (BENCH_BUNDLED, BENCH_HUB, BENCH_UPLOAD, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN, MODE_BATCH,
                      MODE_LIVE, OPENAI_PUBLIC_URL, SUBSETS, RunSummary, ServiceError, endpoint_host, file_safe,
                      shutdown_note)
from .settings import ServiceSettings

log = logging.getLogger("mmvet_grader")

#: How old (seconds) the answer of `status` of a running run may be when it is polled often (progress and scores
#: always come from one snapshot of the run).
STATUS_TTL = 2.0
#: How many runs' `status` answers are kept (each is a few KB).
FINISHED_CACHE_SIZE = 256
#: How many runs' views pages share (`RunReading.view`; a v1 run's view is well under a megabyte).
VIEW_CACHE_SIZE = 32


def _stamp_of(updated_at: float, status: str) -> str:
    return f"{updated_at!r}:{status}"


def _total_stamp(run: RunRecord) -> str:
    """What a kept total belongs to: a rename, an override, a resume or a status change makes it stale."""
    return _stamp_of(run.updated_at, run.status)


class RunReading:
    """What pages and scripts read of runs, from the store, each answer kept until the run changes."""

    def __init__(self, settings: ServiceSettings, store: Store, jobs: JobManager, limits: HostLimits,
                 judges: Judges, exports_dir: Path):
        self.settings, self.store, self.jobs, self.limits, self.judges = settings, store, jobs, limits, judges
        self.exports_dir = exports_dir
        self._status_cache: dict[str, tuple[tuple, float, dict]] = {}   # run -> (change key, computed at, status)
        self._view_cache: dict[str, tuple[tuple, RunView]] = {}           # run -> (change stamp, view)
        self._versions: dict[str, tuple[float, str | None]] = {}          # run -> (read at, run_version)

    def forget_files(self, run_id: str) -> None:
        """Drop a deleted or expired run's exports and kept answers."""
        shutil.rmtree(self.exports_dir / run_id, ignore_errors=True)
        self._status_cache.pop(run_id, None)
        self._view_cache.pop(run_id, None)

    def remember_total_of(self, run_id: str) -> None:
        """Keep an ended run's total for My runs (a failure here must never touch the run)."""
        try:
            view = load_run_view(self.store, run_id)
            if view is not None:
                self.remember_total(view)
        except Exception:  # noqa: BLE001 — My runs computes it again when it is missing
            log.exception("keeping the total of run %s", run_id)

    # ---- what a page or a script reads ----
    def view(self, run_id: str, *, evidence_for: str | None = None) -> RunView | None:
        """A run as pages show it. Without `evidence_for`, one view per change of the run is read and shared by
        every page that shows it (a crowd of share-link viewers reads the run once per change, not once each);
        treat it as read-only."""
        if self.jobs._unsaved:
            self.jobs.retry_unsaved()
        if not run_id:
            return None
        if evidence_for is not None:
            view = load_run_view(self.store, run_id, evidence_for=evidence_for)
        else:
            stamp = self.store.change_stamp(run_id)
            hit = self._view_cache.get(run_id)
            if stamp is not None and hit is not None and hit[0] == stamp:
                view = hit[1]
            else:
                view = load_run_view(self.store, run_id) if stamp is not None else None
                self._view_cache.pop(run_id, None)
                if view is not None:
                    if len(self._view_cache) >= VIEW_CACHE_SIZE:
                        self._view_cache.pop(next(iter(self._view_cache)))
                    self._view_cache[run_id] = (stamp, view)
        if view is not None:
            self.limits.keeper.opened(run_id)
        return view

    def runs_of(self, owner: str, limit: int = 100) -> list[RunSummary]:
        """The visitor's own runs, newest first (no page lists other visitors' runs). Read from one light query
        (no run's predictions or samples decoded) with each ended run's total kept since it was last computed:
        1,000 runs open as fast as 10."""
        if not owner:
            return []
        out = []
        for r in self.store.run_summaries(owner, limit):
            label = f"{r['bench_name'] or '?'}" + (f" · {r['subset']} set" if r["subset"] else "")
            total, complete = None, True
            if r["status"] == "done" or r["provider"] == "imported":
                if r["total_stamp"] == _stamp_of(r["updated_at"], r["status"]):
                    total = r["total"]             # kept for complete runs only (`remember_total`)
                else:
                    view = load_run_view(self.store, r["id"])
                    total = view.scores.total.mean if view else None
                    complete = view.scores.complete if view else True
                    if view is not None:
                        self.remember_total(view)
            status = "running" if self.jobs.is_running(r["id"]) else r["status"]
            out.append(RunSummary(r["id"], r["model_name"], r["judge_model"] or "?", label, r["n_runs"],
                                  r["created_at"], status, total, complete))
        return out

    def card(self, view: RunView) -> dict:
        """The run card: what a page (owner or shared) and the exports say about a run."""
        run, judge = view.run, view.run.judge
        bench = run.benchmark
        status = "running" if self.jobs.is_running(run.id) else run.status
        failure = self.jobs.failure(run.id)
        if failure and status == "running":
            status = "failed"
        usage = self.store.run_usage(run.id)
        if judge.get("provider") in ("baseline", "imported"):     # no judge was called
            usage = {k: 0 for k in usage}
        if judge.get("provider") == "baseline":
            prompt = "none (offline keyword baseline)"
        elif judge.get("provider") == "imported":
            prompt = "unknown (grades imported from a file)"
        elif judge.get("prompt_examples") is not None:
            prompt = f"MM-Vet {bench.get('version', 'v1')} few-shot prompt, examples {judge['prompt_examples']}"
        else:
            prompt = f"official MM-Vet {bench.get('version', 'v1')} few-shot prompt (7 examples)"
        return {"run_id": run.id, "model": run.model_name, "judge_model": view.judge_name,
                "judge": view.judge_text, "endpoint": endpoint_host(judge),
                "mode": "Batch API" if judge.get("mode") == MODE_BATCH else "live",
                "benchmark": bench.get("name", "?"), "version": bench.get("version", "?"),
                "subset": bench.get("subset") or "all samples", "n_samples": len(view.benchmark),
                "runs": run.n_runs, "prompt": prompt, "tool_version": __version__,
                "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(run.created_at)),
                "status": status, "message": run.message, "results_format": run.results_format,
                "metric_note": view.metric_note, "metric_label": view.metric_label,
                "n_overrides": view.n_overrides, "judge_only_total": view.scores.judge_only_total,
                "complete": view.scores.complete, "graded": view.n_graded, "expected": view.n_expected,
                "judge_shutdown_date": judge.get("shutdown_date"),
                "judge_shutdown_note": shutdown_note(judge),
                "predictions_cut": cut_note(judge.get("predictions_cut")), **usage, **self._equivalence_fields(view)}

    def _equivalence_fields(self, view: RunView) -> dict:
        """The card's official-equivalent estimate: the labelled line and the numbers (never the official
        metric; see `mmvet_core.successors.equivalence`)."""
        from ..successors.equivalence import format_capability_line, format_equivalent_line

        eq = self.judges.equivalence(view)
        judge = view.run.judge
        # shown on a card when there is an estimate, or when the reason helps (check this judge; the check
        # refuses): not for the baseline, imported grades or the official judge, which need none
        shown = eq.available or (view.scores.complete and judge.get("provider") not in ("baseline", "imported")
                                 and judge.get("model") not in OFFICIAL_JUDGES) or (
            judge.get("provider") == "imported" and not judge.get("official_metric"))   # a grade file: why not
        return {"official_equivalent": format_equivalent_line(eq), "official_equivalent_shown": shown,
                "official_equivalent_capabilities": format_capability_line(eq),
                "official_equivalent_label": eq.label, "official_equivalent_check": eq.check_text if eq.available
                else "", "official_equivalent_unlike": list(eq.unlike), "official_equivalent_estimate": eq.to_dict()}

    def status(self, run_id: str) -> dict:
        """Progress and scores of a run (what a script polls after grade). Computed once per change of the run
        (its stored status, grades, overrides: `Store.change_stamp`, one cheap query) and served from memory to
        every viewer until the next change; while a run grades, its answer is recomputed at most every STATUS_TTL
        seconds however fast grades arrive. Progress and scores always come from one snapshot (a fresh count beside
        older scores read "251 / 436" next to "over 205 of 436 grades")."""
        if self.jobs._unsaved:
            self.jobs.retry_unsaved()
        stamp = self.store.change_stamp(run_id) if run_id else None
        if stamp is None:
            raise ServiceError("No such run.")
        self.limits.keeper.opened(run_id)
        running = self.jobs.is_running(run_id)
        # a new or grown check changes the card's estimate: the card, the board and MCP read one stored estimate
        # of the current check, so a status computed before that check is stale too
        note = self.jobs.queue_note(run_id) if running else None     # a queued run no worker serves: why
        key = (stamp, running, self.jobs.failure(run_id), self.judges.checks_version(), note)
        now = time.monotonic()
        hit = self._status_cache.get(run_id)
        if hit is not None and hit[0] == key:
            out = hit[2]
        elif hit is not None and running and hit[0][1] and now - hit[1] < STATUS_TTL:
            out = hit[2]                   # the whole snapshot, progress and scores alike; it keeps its own key, so
                                           # the first read after STATUS_TTL sees the change even if the run stalls
        else:
            out = self._compute_status(run_id)
            self._cache_status(run_id, (key, now, out))
        if note and out["status"] == "queued":
            out = {**out, "message": note}
        return {**out, "waiting_until": self.jobs.waiting_until(run_id)}

    def _cache_status(self, run_id: str, entry: tuple) -> None:
        self._status_cache.pop(run_id, None)
        if len(self._status_cache) >= FINISHED_CACHE_SIZE:
            self._status_cache.pop(next(iter(self._status_cache)))       # the least recently changed
        self._status_cache[run_id] = entry

    def _compute_status(self, run_id: str) -> dict:
        from ..runs import views
        view = load_run_view(self.store, run_id)
        if view is None:
            raise ServiceError("No such run.")
        view = self.with_failure(view)
        p = views.progress_of(view)
        self.remember_total(view)
        status, message = view.run.status, view.run.message
        if status not in ("running", "queued") and self.jobs.is_running(run_id):
            # started or resumed a moment ago: its job writes "running" when it begins, on a busy machine after
            # the page has read the stored "stopped" of before the resume
            status, message = "running", ""
        return {"run_id": run_id, "status": status, "message": message, "done": p.done,
                "errored": p.errored, "total": p.total, "total_score": view.scores.total.mean,
                "total_std": view.scores.total.std if view.scores.complete else None,
                "complete": view.scores.complete, "scores": view.scores.to_dict(), "flags": view.flag_counts(),
                "judge": view.judge_text, "metric_note": view.metric_note, "metric_label": view.metric_label,
                "n_overrides": view.n_overrides, "judge_only_total": view.scores.judge_only_total,
                "judge_only_std": view.scores.judge_only_std, "total_text": views.total_text(view),
                "card": self.card(view)}

    def remember_total(self, view: RunView) -> None:
        """Keep the total of an ended run for My runs (so listing 1,000 runs never aggregates them again)."""
        if view.run.status == "running" or self.jobs.is_running(view.run.id) or not view.scores.complete:
            return                       # (a partial total is recomputed, so My runs can say "partial")
        try:
            self.store.set_total(view.run.id, view.scores.total.mean, _total_stamp(view.run))
        except StoreError:
            pass

    def run_version(self, run_id: str, max_age: float = 0.5) -> str | None:
        """A short text that changes whenever what a page shows of the run does (its change stamp, whether its job
        runs or failed, until when it waits out a rate limit), read at most once every `max_age` seconds however
        many open pages follow the run (None: no such run)."""
        now = time.monotonic()
        hit = self._versions.get(run_id)
        if hit is not None and now - hit[0] < max_age:
            return hit[1]
        stamp = self.store.change_stamp(run_id) if run_id else None
        running = self.jobs.is_running(run_id)
        waiting = self.jobs.waiting_until(run_id) if running else None     # a rate-limit pause is shown too
        version = None if stamp is None else \
            f"{stamp[0]}:{stamp[1]!r}:{stamp[3]}:{stamp[4]!r}:{int(running)}:{int(bool(self.jobs.failure(run_id)))}" \
            f":{round(waiting) if waiting else 0}"
        if len(self._versions) > 10_000:
            self._versions.clear()
        self._versions[run_id] = (now, version)
        return version

    def with_failure(self, view: RunView) -> RunView:
        """`view` with the failure a full disk kept from the stored status (which may still say running), or with
        why a queued run waits when no grading worker serves its judge."""
        failure = self.jobs.failure(view.run.id)
        if failure and view.run.status == "running":
            return replace(view, run=replace(view.run, status="failed", message=failure))
        note = self.jobs.queue_note(view.run.id) if view.run.status == "queued" else None
        if note:                # a queued run no worker serves says why, not "waiting for a grading worker"
            return replace(view, run=replace(view.run, message=note))
        return view

    def sample(self, run_id: str, sample_id: str) -> dict:
        """Everything about one sample of a run: texts, every judge attempt, flags, override."""
        from ..runs import views
        view = self.view(run_id or "", evidence_for=sample_id)
        if view is None or sample_id not in view.benchmark.samples:
            raise ServiceError(f"No sample {sample_id!r} in this run.")
        return views.sample_detail(view, sample_id)

    def downloads(self, view: RunView) -> list[str]:
        """The official files, the run card (run.json) and a zip of them all, rewritten only when the run
        changed since the last export."""
        card = self.card(view)
        equivalence = self.judges.equivalence(view)        # before the names are made file-safe (it finds the check)
        view = replace(view, run=replace(view.run, model_name=file_safe(view.run.model_name),
                                         judge={**view.run.judge, "model": file_safe(view.judge_name)}))
        out = self.exports_dir / view.run.id
        stamp = (f"{view.run.updated_at}:{view.n_graded}:{sorted(view.overrides.items())}:{view.run.model_name}:"
                 f"{self.store.judge_checks_stamp()}")
        marker = out / ".stamp"
        if marker.exists() and marker.read_text() == stamp:
            return sorted(str(p) for p in out.iterdir() if p.name != ".stamp")
        if out.exists():
            shutil.rmtree(out)
        paths = dict(export_run(view, out, equivalence=equivalence))
        card_path = out / "run.json"
        card_path.write_text(json.dumps(card, indent=2, ensure_ascii=False))
        paths["run"] = card_path
        zpath = out / f"{view.run.model_name}_mmvet-grades.zip"
        with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
            for p in paths.values():
                z.write(p, arcname=Path(p).name)
        marker.write_text(stamp)
        return sorted(str(p) for p in [*paths.values(), zpath])

    def form_of(self, view: RunView) -> dict | None:
        """The settings a run was started with, as the grading form's values (what a reload restores beside the
        run card), or None for a grade file's view (nothing was graded here). Never a key; the host's endpoint is
        not named (the host judge is its choice)."""
        run, judge = view.run, view.run.judge
        if judge.get("provider") == "imported":
            return None
        if judge.get("provider") == "baseline":
            kind, url, model = JUDGE_BASELINE, "", ""
        elif judge.get("base_url") == self.settings.host_base_url and self.settings.host_key \
                and judge.get("model") == self.settings.judge_model:
            kind, url, model = JUDGE_HOST, "", judge.get("model", "")
        else:
            url = judge.get("base_url") or ""
            kind, url, model = JUDGE_OWN, "" if url == OPENAI_PUBLIC_URL else url, judge.get("model", "")
        spec = str(run.benchmark.get("spec", "mmvet-v1"))
        bench = BENCH_HUB if spec.startswith("hf:") else BENCH_BUNDLED if spec == "mmvet-v1" else BENCH_UPLOAD
        subset = next((label for label, key in SUBSETS.items() if key == run.benchmark.get("subset")), "All samples")
        return {"n_runs": run.n_runs, "judge": kind, "base_url": url, "judge_model": model,
                "mode": MODE_BATCH if judge.get("mode") == MODE_BATCH else MODE_LIVE, "benchmark": bench,
                "hub_id": spec.removeprefix("hf:") if bench == BENCH_HUB else "", "subset": subset,
                "model_name": run.model_name}

    def share_url(self, run_id: str, base: str | None) -> str:
        """The read-only link of a run: the configured public URL, else the address the page was opened at."""
        root = self.settings.public_url or base or "http://localhost:7860"
        return f"{root.rstrip('/')}/?run={run_id}"

