"""Official-equivalent estimates of models the check never saw (issue 23): print the table.

Four simulated successor judges answer a known function of each sample's official gpt-4-0613 grade (the answer
table of tests/fake_judge.py, applied without HTTP). For each, and each unseen model (a shipped reference left out
of the check), the check is assessed on the other default references and the unseen model's grades are corrected
into an official-equivalent estimate. Columns: the official total, the judge's own total, the estimate and its 95 %
interval, its width, whether the interval holds the official total, the label. `--terms` adds what the interval is
made of (points): the per-sample scatter, the correction's own uncertainty and the model-to-model term beyond it
(standard deviations), the Student-t quantile times their root sum of squares, the largest leave-one-out error it may
not undercut, and the widening (extrapolated, unlike the references).

    python -m bench.estimate_heldout [--unseen MODEL ...] [--references default|all] [--resamples N]
                                     [--successors all|first|harder|coarse] [--terms]
"""
from __future__ import annotations

import argparse
import time

from mmvet_core.inputs.benchmark import load_bundled_v1
from mmvet_core.successors.calibration import LomoTable, t95
from mmvet_core.successors.equivalence import estimate_equivalent
from mmvet_core.successors.judgecheck import assess_judge, load_references
from tests.fake_judge import HARDER_SUCCESSORS, SUCCESSORS, official_grades_answer, simulate_grades


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unseen", nargs="*", default=None, help="reference models to leave out (default: each)")
    parser.add_argument("--references", default="default", help="the check's sets: default or all")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--successors", default="all", choices=("all", "first", "harder", "coarse"),
                        help="the four first simulated successors, the four harder ones (issue 30), the coarse "
                             "one, or all")
    parser.add_argument("--terms", action="store_true", help="add the interval's terms (points)")
    args = parser.parse_args()
    bench = load_bundled_v1()
    every = load_references(which="all")
    pool = load_references(which=args.references)
    unseen = args.unseen or [r.model for r in pool]
    terms = " scatter | correction | model | t × sd | largest LOMO error | widened |" if args.terms else ""
    print(f"| simulated successor | unseen model | official | judge's own | estimate [95 %] | width | holds | label |"
          + terms)
    print("|---|---|---|---|---|---|---|---|" + "---|" * (6 if args.terms else 0))
    misses, widest, t0 = 0, 0.0, time.time()
    coarse = {k: v for k, v in HARDER_SUCCESSORS.items() if k.startswith("coarse")}
    chosen = {"first": SUCCESSORS, "harder": HARDER_SUCCESSORS, "coarse": coarse}.get(
        args.successors, {**SUCCESSORS, **HARDER_SUCCESSORS})
    for name, fn in chosen.items():
        answer = official_grades_answer(which="all", transform=fn)
        grades = {r.model: simulate_grades(answer, r.predictions) for r in every}
        for model in unseen:
            refs = [r for r in pool if r.model != model]
            check = assess_judge(bench, refs, {r.model: grades[r.model] for r in refs}, {"model": "judge-b"},
                                 resamples=500)
            target = next(r for r in every if r.model == model)
            eq = estimate_equivalent(bench, grades[model], check, run_judge={"model": "judge-b", "provider": "openai"},
                                     predictions=target.predictions, resamples=args.resamples)
            t = eq.total
            if t is None:
                print(f"| {name} | {model} | {target.official_total:.1f} | | none ({eq.reason}) | | | |")
                misses += 1
                continue
            holds = t.low <= target.official_total <= t.high
            misses += not holds
            widest = max(widest, t.high - t.low)
            print(f"| {name} | {model} | {target.official_total:.1f} | {t.score:.1f} | {t.estimate:.1f} "
                  f"[{t.low:.1f}, {t.high:.1f}] | {t.high - t.low:.1f} | {'yes' if holds else 'NO'} | {eq.label} |"
                  + (interval_terms(t, check) if args.terms else ""))
    print(f"\n{misses} interval(s) miss the official total; widest {widest:.1f} points; {time.time() - t0:.0f} s")


def interval_terms(t, check) -> str:
    """The interval's terms as table cells: half-width = max(t × sd, largest LOMO error) + widened, where sd² is
    the sum of the three squared standard deviations (calibration.estimate_run)."""
    lomo = LomoTable.from_dict(check.lomo)
    q = t95(len(lomo.rows) - 1) if lomo else float("nan")
    sd = (t.scatter_sd ** 2 + t.correction_sd ** 2 + t.model_sd ** 2) ** 0.5
    return (f" {t.scatter_sd:.2f} | {t.correction_sd:.2f} | {t.model_sd:.2f} | {q:.3f} × {sd:.2f} = {q * sd:.2f} | "
            f"{t.floor:.2f} | {t.widened:.2f} |")


if __name__ == "__main__":
    main()
