"""Issue 33 row 1, measured: a visitor rewrites the judge check behind everyone's estimate (run by hand).

    python bench/attack_checks.py                 # this code, all six default sets poisoned (about a minute)
    python bench/attack_checks.py --sets 3        # three of them
    python bench/attack_checks.py --code DIR      # an older version (a plain copy: `git archive` extracted)

The host's judge (`tests/fake_judge.py` on 127.0.0.1, model ``judge-b``) answers every reference prompt with its
official grade + 0.1. The host checks it; a victim grades the llava-v1.5-7b re-run (official total 30.7, in no
default set) and reads its official-equivalent estimate. Then a visitor grades `--sets` reference sets with the
server's judge under the run names a check uses (``judge-check <set>``), overrides every grade with the official
one − 0.2 and starts the check again. Printed: the judge calls of that check, the check's id and total shift
before and after, and the victim's estimate on its card and on the leaderboard before and after.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=int, default=6, help="reference sets the visitor poisons (default 6)")
    ap.add_argument("--code", type=Path, default=None, help="another version's folder to import mmvet_core from")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))

    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.successors.judgecheck import REFERENCE_DIR, current_check, load_manifest, load_references
    from mmvet_core.service import BENCH_BUNDLED, JUDGE_HOST, BenchmarkChoice, GradingService, JudgeChoice, \
        ServiceSettings
    from tests.fake_judge import FakeJudgeServer, official_grades_answer

    host, every = JudgeChoice(JUDGE_HOST), BenchmarkChoice(BENCH_BUNDLED)

    def wait_check(svc, owner):
        while svc.judges.judge_check_text(host, owner)[1]:
            time.sleep(0.05)

    def grade(svc, path, owner, name=""):
        run_id, _ = svc.runs.start(str(path), every, 1, host, owner=owner, visitor=owner, model_name=name)
        while svc.jobs.is_running(run_id):
            time.sleep(0.02)
        return run_id

    def shown(svc, run_id, entry):
        eq = svc.reading.status(run_id)["card"]["official_equivalent_estimate"]
        card = (f"{eq['columns'][0]['estimate']:.1f} [{eq['columns'][0]['low']:.1f}, {eq['columns'][0]['high']:.1f}]"
                if eq.get("available") else f"none ({eq.get('reason')})")
        row = next(r for r in svc.board.leaderboard() if r.entry == entry)
        board = (f"{row.official_equivalent[0]:.1f} [{row.official_equivalent[1]:.1f}, "
                 f"{row.official_equivalent[2]:.1f}]" if row.official_equivalent else "none")
        return card, board

    with FakeJudgeServer() as judge, tempfile.TemporaryDirectory() as tmp:
        judge.state.answer_fn = official_grades_answer(0.1, which="all")
        svc = GradingService(ServiceSettings(data_dir=Path(tmp), host_key="sk-host", host_base_url=judge.url,
                                             judge_model="judge-b", allow_private_endpoints=True, run_concurrency=8))
        try:
            svc.judges.check_judge(host, "host", "host")
            wait_check(svc, "host")
            before = current_check(svc.store, svc.settings.host_settings())
            victim = grade(svc, REFERENCE_DIR / "llava-v1.5-7b-rerun.json", "victim")
            entry = svc.board.publish(victim, "victim model", "", "victim", visitor="victim")["entry"]
            card0, board0 = shown(svc, victim, entry)

            bench = load_bundled_v1()
            for src, ref in list(zip(load_manifest(), load_references(which="all")))[:args.sets]:
                run_id = grade(svc, REFERENCE_DIR / src.predictions, "attacker", name=f"judge-check {ref.model}")
                for sid in bench.ids:
                    official = [v for v in ref.official[sid] if v is not None]
                    svc.runs.override(run_id, "attacker", sid, max(0.0, round(sum(official) / len(official) - 0.2,
                                                                                 3)), "poison")
            calls = len(judge.state.chat_calls())
            svc.judges.check_judge(host, "attacker", "attacker")
            wait_check(svc, "attacker")
            calls = len(judge.state.chat_calls()) - calls
            after = current_check(svc.store, svc.settings.host_settings())
            card1, board1 = shown(svc, victim, entry)
        finally:
            svc.jobs.shutdown()
            svc.store.close()
    print(f"code: {args.code or ROOT}; sets poisoned: {args.sets}; the attacker's check made {calls} judge calls")
    print(f"check:  {before.check_id} shift {before.total.shift:+.1f}  ->  {after.check_id} shift "
          f"{after.total.shift:+.1f}  ({'unchanged' if after.check_id == before.check_id else 'REPLACED'})")
    print(f"victim's estimate (official 30.7): card {card0}, board {board0}  ->  card {card1}, board {board1}")


if __name__ == "__main__":
    main()
