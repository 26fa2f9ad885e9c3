"""Grading beyond one process (mmvet_core/runs/workers.py, the store's grading queue and shared pace): leases on the
database's clock, claims that never give one run to two workers, a run queued by one process graded by a worker
and followed (and stopped) from another, a grader that lost its lease writing nothing over its successor, one
judge account's limit and one day's budget shared by every process. On both databases where the queue's SQL is
concerned; the end-to-end run across machines (kill -9, nginx, a browser) is tests/test_many_machines.py."""
from __future__ import annotations

import threading
from collections import Counter

import pytest

from mmvet_core.judging.budget import BudgetLimits, HostBudget
from mmvet_core.judging.grading import BudgetExceeded
from mmvet_core.runs.jobs import TooManyRuns
from mmvet_core.judging.judge import JudgeSettings, make_judge
from mmvet_core.service import ServiceSettings
from mmvet_core.store import RunSlots, SlotsTaken, Store
from mmvet_core.runs.workers import EXTERNAL, LeasedJobs, Worker, make_jobs
from tests.call_gate import CallGate
from tests.fake_judge import FakeJudgeServer, FakeState
from tests.test_grading import new_run, predictions_for, samples_called, tiny
from tests.waiting import wait_until

WORK = {"judge": {"model": "m"}, "host": True}
HOST = "openai|http://judge|"


def answered(judge) -> int:
    """Chat calls the judge answered (and billed)."""
    return sum(c.get("status") == 200 for c in judge.state.calls)


def hold_after(judge, n: int) -> CallGate:
    """From now on the judge answers `n` more calls, then holds every call until the gate opens."""
    gate = judge.state.gate = CallGate()
    gate.release(n)
    return gate


def run_row(store: Store, model: str = "m", owner: str = "alice") -> str:
    return store.create_run(model_name=model, benchmark={}, n_runs=1, judge={}, predictions={}, owner=owner)


# --- the queue's leases, on both databases -----------------------------------------------------------------------

def test_leases_pass_on_the_databases_clock_and_only_their_holder_writes(any_store):
    store = any_store
    held, queued, keyed = (run_row(store) for _ in range(3))
    store.enqueue_run(held, work=WORK, endpoint=HOST, claimable=False, holder="A", lease=60)
    store.enqueue_run(queued, work=WORK, endpoint=HOST, visitor="v1", claimable=True)
    store.enqueue_run(keyed, work=WORK, endpoint=HOST, claimable=False, holder="A", lease=60)
    assert store.renew_leases("A", 60) == {held: False, keyed: False}
    assert sorted(store.queued_runs()) == sorted([held, queued, keyed])
    assert store.queued_runs("v1") == [queued]
    assert [r["run_id"] for r in store.waiting_runs()] == [queued]      # what the workers' slices grade

    # A dies: its leases pass (a lease of -1 s has passed already); the runs only A could grade (a visitor's key
    # in A's memory) are reaped: stopped, their owners resume them
    store.set_status(keyed, "running")
    store.renew_leases("A", -1)
    assert store.queued_run(keyed)["live"] is False and store.queued_run(queued)["live"] is True
    assert sorted(store.reap_leases()) == sorted([held, keyed])
    assert store.get_run(keyed).status == "stopped" and "Resume" in store.get_run(keyed).message
    assert store.queued_run(keyed) is None

    # only the holder writes the run's status, and releases its row
    store.enqueue_run(held, work=WORK, endpoint=HOST, claimable=False, holder="B", lease=60)
    assert not store.set_status_if_held(held, "A", "stopped")
    assert store.set_status_if_held(held, "B", "running") and store.get_run(held).status == "running"
    assert not store.release_run(held, "A")
    assert store.release_run(held, "B") and store.queued_run(held) is None

    # a run graded in slices ends once, by the generation of its grading
    generation = store.queued_run(queued)["enqueued_at"]
    store.set_status(queued, "queued")
    store.mark_running(queued)
    assert store.get_run(queued).status == "running"
    assert not store.finish_queued(queued, generation + 1, "done", "x")         # an earlier grading's slice
    assert store.finish_queued(queued, generation, "done", "2 grades")
    assert not store.finish_queued(queued, generation, "done", "again")
    assert (store.get_run(queued).status, store.get_run(queued).message) == ("done", "2 grades")


def test_stop_reaches_a_run_wherever_it_is_and_a_restart_leaves_queued_runs_alone(any_store):
    store = any_store
    waiting, graded, lone = (run_row(store) for _ in range(3))
    store.enqueue_run(waiting, work=WORK, endpoint=HOST, claimable=True)
    store.enqueue_run(graded, work=WORK, endpoint=HOST, claimable=True, holder="W", lease=60)
    for run_id in (waiting, graded, lone):
        store.set_status(run_id, "running")
    # an app process starting again stops only the runs no process grades or will grade
    assert store.mark_interrupted() == 1
    assert [store.get_run(r).status for r in (waiting, graded, lone)] == ["running", "running", "stopped"]
    # a run nobody grades yet leaves the queue at once; a graded one gets the flag its holder reads
    assert store.request_stop(waiting, "stopped by the user") == "stopped"
    assert store.get_run(waiting).status == "stopped" and store.queued_run(waiting) is None
    assert store.request_stop(graded, "stopped by the user") == "asked"
    assert store.renew_leases("W", 60) == {graded: True}
    assert store.request_stop(lone, "x") == "none"
    store.delete_run(graded)                  # deleting a run takes it out of the queue
    assert store.queued_run(graded) is None


def test_processes_starting_runs_at_once_never_pass_the_run_slots(db_location):
    """Three processes (three stores on one database), eight threads each, start runs of one visitor at the same
    instant with 2 slots per visitor and 5 for the server: exactly 2 of that visitor's rows are queued and the 22
    others are refused with nothing written; then twelve threads start runs of twelve other visitors at once and
    exactly the 3 slots left of the server's 5 are taken."""
    stores = [Store(db_location) for _ in range(3)]
    slots = RunSlots(per_visitor=2, max_active=5)

    def race(starts: list[tuple[str, str]]) -> Counter:
        outcome: Counter = Counter()
        barrier = threading.Barrier(len(starts))

        def start(store: Store, run_id: str, visitor: str) -> None:
            barrier.wait()
            try:
                store.enqueue_run(run_id, work=WORK, endpoint=HOST, visitor=visitor, claimable=False,
                                  holder=f"holder-{run_id}", lease=600, slots=slots)
                outcome["queued"] += 1
            except SlotsTaken as e:
                outcome[e.scope] += 1

        threads = [threading.Thread(target=start, args=(stores[i % 3], run_id, visitor))
                   for i, (run_id, visitor) in enumerate(starts)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return outcome

    assert race([(f"v{i}", "v") for i in range(24)]) == Counter(queued=2, visitor=22)
    assert len(stores[1].queued_runs("v")) == 2
    assert race([(f"w{i}", f"w{i}") for i in range(12)]) == Counter(queued=3, server=9)
    assert len(stores[2].queued_runs()) == 5
    for s in stores:
        s.close()


def test_processes_charging_one_day_at_once_never_pass_its_budget(db_location):
    """Two processes (two stores on one database) charge 30 calls each against a global budget of 40: exactly 40
    are counted, the others refused."""
    budgets = [HostBudget(Store(db_location), BudgetLimits(per_visitor_daily=0, global_daily=40,
                                                           tokens_per_visitor_daily=0, tokens_global_daily=0))
               for _ in range(2)]
    refused = Counter()

    def spend(budget: HostBudget, visitor: str) -> None:
        for _ in range(30):
            try:
                budget.charge(visitor, 10)
            except BudgetExceeded:
                refused[visitor] += 1

    threads = [threading.Thread(target=spend, args=(b, v)) for b, v in zip(budgets, ("a", "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = budgets[0].store
    from mmvet_core.judging.budget import today
    assert store.usage(today()) == 40 and sum(refused.values()) == 20
    for b in budgets:
        b.store.close()


# --- processes grading ---------------------------------------------------------------------------------------

@pytest.fixture
def judge():
    with FakeJudgeServer(FakeState(latency=0.02)) as server:
        yield server


def host_settings(judge) -> ServiceSettings:
    return ServiceSettings(host_key="sk-host", host_base_url=judge.url)


def test_two_workers_share_a_run_queued_by_the_app_which_follows_it_and_stops_another(pg_url, judge):
    """The app (MMVET_WORKERS=external) only queues a host-key run, cut in slices; two workers (one slice at a time
    each) grade it together while the judge holds their calls; the app process sees it queued, running, then
    done; every answer is paid once. A second run is stopped from the app while the workers grade it: its slices
    end (their calls in flight answer first) and it stays stopped."""
    app_store, stores = Store(pg_url), [Store(pg_url) for _ in range(2)]
    app = make_jobs(app_store, workers=EXTERNAL, lease=5.0)
    workers = [Worker(s, host_settings(judge), slices=1, lease=5.0, poll=0.05) for s in stores]
    stop = threading.Event()
    threads = [threading.Thread(target=w.run, args=(stop,)) for w in workers]
    settings = JudgeSettings(base_url=judge.url)
    bench = tiny(12)
    try:
        gate = hold_after(judge, 2)
        run_id = new_run(app_store, bench, settings, n_runs=2)          # 24 grades: 2 slices
        assert app.start(run_id, bench, make_judge(settings, "sk-host"), host=True, visitor="v")
        assert app_store.get_run(run_id).status == "queued" and app.is_running(run_id)
        assert app.running_count("v") == 1 and app.running_ids() == [run_id]
        for t in threads:
            t.start()
        wait_until(lambda: all(run_id in w.runs for w in workers), what="both workers to grade a slice")
        assert app_store.get_run(run_id).status == "running"
        gate.open()
        wait_until(lambda: app_store.get_run(run_id).status == "done", what="the run graded by the workers")
        # (the run is written done before its last slice's job leaves the queue)
        wait_until(lambda: not app.is_running(run_id), what="the run's jobs to leave the queue")
        assert app_store.get_run(run_id).message == "24 grades"
        assert answered(judge) == app_store.cache_size()

        gate = hold_after(judge, 3)                 # the next run stays in the middle
        second = new_run(app_store, bench, settings, predictions={s: "other" for s in bench.ids})
        assert app.start(second, bench, make_judge(settings, "sk-host"), host=True, visitor="v")
        try:
            gate.wait_held(1)
        except TimeoutError as e:           # (seen once in a whole suite's run: say where the run stood)
            raise AssertionError(f"{e}; the second run {app_store.get_run(second).status!r}, "
                                 f"{app_store.count_grades(second)}; workers busy {[w.busy() for w in workers]}, "
                                 f"graded runs {[len(w.runs) for w in workers]}; {gate.passed} call(s) passed the "
                                 f"gate, {len(judge.state.calls)} in all") from None
        assert app_store.get_run(second).status == "running" and app.is_running(second)
        assert app.stop(second)
        assert app_store.get_run(second).status == "stopped" and not app.is_running(second)
        wait_until(lambda: not any(w.busy() for w in workers), what="the slices to end")
        # the ended slices hung up on their held calls: the judge sees each client gone before the gate opens
        wait_until(lambda: gate.held == 0, what="the held calls to see their clients gone")
        gate.open()                                 # (the calls in flight answered or were cancelled)
        assert app_store.get_run(second).status == "stopped" and app_store.count_grades(second).get("ok", 0) < 12
        wait_until(lambda: judge.state.in_flight == 0, what="the judge's last answers")
        assert answered(judge) == app_store.cache_size()            # (the cache holds each answer once)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        app.shutdown()
        for s in [app_store, *stores]:
            s.close()


def test_two_replicas_starting_runs_of_one_visitor_at_once_give_them_one_slot(pg_url, judge):
    """Two app replicas, each with 1 run slot per visitor, start four runs each for one visitor at once. Each
    replica's first start is held at its write to the queue (the test holds the queue's table), after both have
    counted the visitor's runs: the database lets exactly one of them through (the count and the row are one
    transaction under the visitor's lock); every other start is refused as the visitor's slots being taken."""
    import psycopg

    stores = [Store(pg_url) for _ in range(2)]
    replicas = [LeasedJobs(s, lease=600, per_visitor=1) for s in stores]
    settings = JudgeSettings(base_url=judge.url)
    bench = tiny(1)
    judge.state.gate = CallGate()                   # the runs that start grade until the test lets them end
    outcome: Counter = Counter()

    def start(jobs: LeasedJobs, run_id: str) -> None:
        try:
            jobs.start(run_id, bench, make_judge(settings, "sk-test"), visitor="visitor-v")
            outcome["started"] += 1
        except TooManyRuns as e:
            outcome["refused: slots taken" if "run(s) grading" in str(e) else str(e)] += 1

    runs = [new_run(stores[0], bench, settings) for _ in range(8)]
    threads = [threading.Thread(target=start, args=(replicas[i % 2], run_id)) for i, run_id in enumerate(runs)]
    try:
        with psycopg.connect(pg_url) as holder:         # reads pass; writes to the queue wait until it commits
            holder.execute("LOCK TABLE grading_queue IN EXCLUSIVE MODE")
            for t in threads:
                t.start()
            with psycopg.connect(pg_url, autocommit=True) as watcher:
                waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() " \
                          "AND wait_event_type = 'Lock'"
                wait_until(lambda: watcher.execute(waiting).fetchone()[0] >= 2,
                           what="both replicas' first start to wait at the queue")
        for t in threads:
            t.join(60)
        assert outcome == Counter({"started": 1, "refused: slots taken": 7})
        assert len(stores[0].queued_runs("visitor-v")) == 1
    finally:
        judge.state.gate.open()
        for jobs in replicas:
            jobs.shutdown()
        for s in stores:
            s.close()


def test_processes_sharing_a_judge_account_keep_to_its_limit_together(pg_url):
    """Two processes (each its own event loop and database connections) grade at once with one key against a
    judge allowing 15 requests/s: their limiters pace through the database, so together they stay near the limit
    with few 429s, and both runs finish."""
    stores = [Store(pg_url) for _ in range(2)]
    with FakeJudgeServer(FakeState(rps=15, latency=0.05)) as judge:
        settings = JudgeSettings(base_url=judge.url)
        jobs = [LeasedJobs(s, lease=5.0) for s in stores]
        try:
            runs = [(new_run(stores[0], tiny(25, start=25 * i), settings, n_runs=2), tiny(25, start=25 * i))
                    for i in range(2)]
            for j, (run_id, bench) in zip(jobs, runs):
                j.start(run_id, bench, make_judge(settings, "sk-host"), host=True)
            outcomes = [j.wait(run_id, timeout=120) for j, (run_id, _) in zip(jobs, runs)]
        finally:
            for j in jobs:
                j.shutdown()
        calls = list(judge.state.calls)
    assert [o.status for o in outcomes] == ["done", "done"]
    refused = sum(c["status"] == 429 for c in calls)
    assert refused <= 0.25 * 100, refused
    # (how near the limit they run together is a figure of bench/bench_workers.py: a rate floor here would fail
    # on a busy machine)
    paces = [name for name, rows in stores[0].iter_tables() if name == "judge_pace" and rows]
    assert paces == ["judge_pace"]
    for s in stores:
        s.close()


def queue_for_workers(store: Store, bench, settings: JudgeSettings, **kwargs) -> str:
    """A run queued as the app queues it with MMVET_WORKERS=external (its slices deferred)."""
    jobs = make_jobs(store, workers=EXTERNAL, lease=5.0)
    run_id = new_run(store, bench, settings, **kwargs)
    jobs.start(run_id, bench, make_judge(settings, "sk-host"), host=True)
    jobs.shutdown()
    return run_id


def test_a_worker_leaving_hands_its_slice_over_after_its_calls_in_flight_answered(pg_url, judge):
    """SIGTERM (here: the `leave` it triggers) while calls are in flight: no new grade starts, the calls in flight
    answer and are stored, then the slice goes back to the queue with the run's status untouched, and another
    worker finishes it without asking any stored answer again."""
    store, stores = Store(pg_url), [Store(pg_url) for _ in range(2)]
    settings = JudgeSettings(base_url=judge.url)
    bench = tiny(10)
    leaving, staying = (Worker(s, host_settings(judge), lease=2.0, poll=0.05) for s in stores)
    stop = threading.Event()
    try:
        gate = hold_after(judge, 3)
        run_id = queue_for_workers(store, bench, settings)
        first = threading.Thread(target=leaving.run, args=(stop,))
        first.start()
        gate.wait_held(1)
        stop.set()                                  # the worker leaves while its calls are held
        wait_until(lambda: leaving._leaving, what="the worker to leave")
        gate.open()                                 # the calls in flight answer
        first.join(60)
        assert store.get_run(run_id).status == "running" and store.queued_run(run_id) is not None
        assert store.cache_size() == answered(judge) > 3           # the calls in flight answered, all stored
        second = threading.Thread(target=staying.run, args=(threading.Event(),))
        staying_stop = second._args[0]
        second.start()
        wait_until(lambda: store.get_run(run_id).status == "done", what="the other worker to finish")
        staying_stop.set()
        second.join(60)
        asked = Counter((c["prompt"], c["temperature"]) for c in judge.state.calls if c["status"] == 200)
        assert max(asked.values()) == 1 and store.get_run(run_id).message == "10 grades"
    finally:
        stop.set()
        for s in [store, *stores]:
            s.close()


def test_a_worker_whose_heartbeat_is_late_never_queues_again_the_slice_it_is_grading(pg_url, judge):
    """A worker's heartbeat row can fall behind while it lives (a busy machine; it stops while the worker hands its
    slices over): its own sweep must not take for dead the slice it is grading, which it would then fetch and
    ask the judge again for while the first calls are still in flight (seen once in a busy suite: 13 answers paid
    twice). Here the row's heartbeat is set an hour back and frozen while the judge holds the slice's calls."""
    import psycopg

    store, wstore = Store(pg_url), Store(pg_url)
    settings = JudgeSettings(base_url=judge.url)
    worker = Worker(wstore, host_settings(judge), lease=2.0, poll=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,))
    try:
        gate = hold_after(judge, 0)
        run_id = queue_for_workers(store, tiny(4), settings)
        thread.start()
        gate.wait_held(4)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE procrastinate_workers SET last_heartbeat = now() - interval '1 hour'")
            conn.execute("CREATE FUNCTION frozen() RETURNS trigger LANGUAGE plpgsql AS "
                         "$$ BEGIN NEW.last_heartbeat := OLD.last_heartbeat; RETURN NEW; END $$")
            conn.execute("CREATE TRIGGER frozen BEFORE UPDATE ON procrastinate_workers "
                         "FOR EACH ROW EXECUTE FUNCTION frozen()")
            swept = worker.sweeps
            wait_until(lambda: worker.sweeps >= swept + 2, what="two sweeps with the heartbeat an hour old")
            status, attempts = conn.execute("SELECT status, attempts FROM procrastinate_jobs").fetchone()
            assert (status, attempts) == ("doing", 0)          # still the worker's, never queued again
            gate.open()
            wait_until(lambda: store.get_run(run_id).status == "done", what="the run to finish")
        asked = Counter((c["prompt"], c["temperature"]) for c in judge.state.calls)
        assert max(asked.values()) == 1 and store.get_run(run_id).message == "4 grades"
    finally:
        stop.set()
        thread.join(60)
        for s in (store, wstore):
            s.close()


def test_a_slice_that_begins_while_the_worker_looks_at_the_queue_is_graded_not_stopped(pg_url, judge):
    """A worker looks at the queue every `poll` seconds (`Worker.tend`) to pass Stop on to its slices. A run's first
    slice that began between that look's read and its verdict has no mark in what was read: it used to be taken
    for a run gone from the queue, its slice stopped before its first call and its job ended, so the run stayed
    ``running`` with no grade for good (seen once in a suite). Here the look is held between the two."""
    store, wstore = Store(pg_url), Store(pg_url)
    worker = Worker(wstore, host_settings(judge), slices=1, lease=5.0, poll=0.05)
    looks, after_read, go_on = [], threading.Event(), threading.Event()
    read_marks = wstore.queue_marks

    def held_after_the_read(run_ids):
        marks = read_marks(run_ids)
        looks.append(run_ids)
        if len(looks) == 1:
            after_read.set()
            go_on.wait(60)
        return marks

    wstore.queue_marks = held_after_the_read
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,))
    try:
        gate, bench = hold_after(judge, 0), tiny(4)
        thread.start()
        after_read.wait(60)                          # the worker's look read the marks of no run
        run_id = queue_for_workers(store, bench, JudgeSettings(base_url=judge.url))
        gate.wait_held(4)                            # its slice began: every call in flight
        go_on.set()
        wait_until(lambda: len(looks) >= 3, what="two more looks at the queue")
        assert worker.busy() == 1 and gate.held == 4
        gate.open()
        wait_until(lambda: store.get_run(run_id).status == "done", what="the run to finish")
        assert store.get_run(run_id).message == "4 grades"
    finally:
        go_on.set()
        stop.set()
        thread.join(60)
        for s in (store, wstore):
            s.close()


def test_replicas_on_one_database_name_a_visitor_alike(tmp_path, pg_url):
    """Two app replicas (each its own data folder, as on two machines) on one PostgreSQL database: a visitor's id
    (what budgets and run slots count) is the same on both, and the second replica sees the first's runs grading
    (here: one queued) in that visitor's slots."""
    from mmvet_core.service import GradingService

    replicas = [GradingService(ServiceSettings(data_dir=tmp_path / f"replica{i}", database_url=pg_url,
                                               workers=EXTERNAL)) for i in (1, 2)]
    try:
        ids = [r.limits.visitor("203.0.113.7", None) for r in replicas]
        assert ids[0] == ids[1] != replicas[0].limits.visitor("203.0.113.8", None)
        run_id = run_row(replicas[0].store)
        replicas[0].store.enqueue_run(run_id, work=WORK, endpoint=HOST, visitor=ids[0], claimable=True)
        assert replicas[1].jobs.running_count(ids[1]) == 1 and replicas[1].jobs.is_running(run_id)
    finally:
        for r in replicas:
            r.jobs.shutdown()
            r.store.close()


@pytest.mark.parametrize("how", ["resume", "start"])
def test_the_same_run_started_on_two_replicas_at_once_is_graded_once(tmp_path, pg_url, judge, how):
    """Issue 33: the same run started on both replicas at once was graded twice (218 answers paid twice). Both
    replicas here have checked that nothing grades the run (or the job) when the test lets them write: the start's
    claim in the database (`Store.claim_start`, `claim_job`) lets one through; the other answers that the run is
    already grading (a start: the same run, ``started`` False), and every answer is paid once."""
    import psycopg

    from mmvet_core.service import BenchmarkChoice, GradingService, JudgeChoice, JUDGE_HOST
    from tests.app_fixtures import RESULTS_DIR

    settings = dict(database_url=pg_url, host_key="sk-host", host_base_url=judge.url)
    replicas = [GradingService(ServiceSettings(data_dir=tmp_path / f"replica{i}", **settings)) for i in (1, 2)]
    results = str(RESULTS_DIR / "llava-v1.5-7b.json")
    owner, visitor = "owner-token-of-the-visitor-1234", "visitor-v"
    answers: list = [None, None]
    try:
        stopped = None
        if how == "resume":
            gate = judge.state.gate = CallGate()            # no answer: the run is stopped before it grades
            stopped, _ = replicas[0].runs.start(results, BenchmarkChoice(), 1, JudgeChoice(JUDGE_HOST),
                                                owner=owner, visitor=visitor)
            gate.wait_held(1)
            replicas[0].runs.stop(stopped, owner)
            gate.open()
            replicas[0].jobs.wait(stopped, timeout=60)
            judge.state.gate = None
            assert replicas[0].store.get_run(stopped).status == "stopped"
        before = len(judge.state.calls)          # (the stopped run's held calls were answered before)

        def go(i: int) -> None:
            r = replicas[i]
            if how == "resume":
                answers[i] = r.runs.resume(stopped, owner, visitor, JudgeChoice(JUDGE_HOST))
            else:
                answers[i] = r.runs.start(results, BenchmarkChoice(), 1, JudgeChoice(JUDGE_HOST), owner=owner,
                                          visitor=visitor)
        threads = [threading.Thread(target=go, args=(i,)) for i in (0, 1)]
        with psycopg.connect(pg_url) as holder:          # reads pass; writes to runs wait until it commits
            holder.execute("LOCK TABLE runs IN EXCLUSIVE MODE")
            for t in threads:
                t.start()
            with psycopg.connect(pg_url, autocommit=True) as watcher:
                waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() " \
                          "AND wait_event_type = 'Lock'"
                wait_until(lambda: watcher.execute(waiting).fetchone()[0] >= 2,
                           what="both replicas' starts to wait at the runs table")
        for t in threads:
            t.join(120)
        if how == "resume":
            assert sorted(a.split(":")[0] for a in answers) == ["Resumed", "This run is already grading."], answers
            run_id = stopped
        else:
            (first, started1), (second, started2) = answers
            assert first == second and sorted([started1, started2]) == [False, True], answers
            run_id = first
        for r in replicas:
            r.jobs.wait(run_id, timeout=120)
        wait_until(lambda: replicas[0].store.get_run(run_id).status == "done", what="the run graded")
        asked = Counter((c["prompt"], c["temperature"]) for c in judge.state.calls[before:]
                        if c.get("status") == 200)
        # no answer paid twice (none at all when the stopped run's held calls had answered every prompt)
        assert not asked or max(asked.values()) == 1, asked.most_common(2)
        assert sum(replicas[0].store.count_grades(run_id).values()) == 218
    finally:
        judge.state.gate = None
        for r in replicas:
            r.jobs.shutdown()
            r.store.close()


def test_two_worker_processes_share_a_run_and_one_finishes_it_after_the_other_is_killed(pg_url, judge):
    """Two `python -m mmvet_core worker` processes, one given the judge's base URL as the replicas spell it and
    one as ``http://localhost:PORT/v1/`` (the same endpoint): both grade slices of one run (the judge holds their
    calls); one is killed (SIGKILL); the other queues its slices again once its heartbeats stop and finishes the
    run. Every answer the judge gave is stored, and only calls that were in flight at the kill are asked twice."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    import psycopg

    root = Path(__file__).resolve().parent.parent
    store = Store(pg_url)
    localhost = judge.url.replace("127.0.0.1", "localhost") + "/"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_", "MMVET_"))}
    procs = [subprocess.Popen([sys.executable, "-m", "mmvet_core", "worker", "--slices", "2", "--poll", "0.1",
                               "--lease", "2"], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**base, "PYTHONPATH": str(root), "MMVET_DATABASE_URL": pg_url,
                                   "OPENAI_API_KEY": "sk-host", "OPENAI_BASE_URL": url})
             for url in (judge.url, localhost)]
    try:
        wait_until(lambda: len(store.live_workers(30)) == 2, what="both workers to start")
        gate, bench = hold_after(judge, 6), tiny(48)
        run_id = queue_for_workers(store, bench, JudgeSettings(base_url=judge.url))          # 4 slices
        doing = "SELECT count(DISTINCT worker_id) FROM procrastinate_jobs WHERE status = 'doing'"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            wait_until(lambda: conn.execute(doing).fetchone()[0] == 2, what="both workers to grade slices")
        # every pair asked (each slice's calls go out at once): 6 answered and stored, the others held
        wait_until(lambda: len(samples_called(list(judge.state.calls), predictions_for(bench))) == 48
                   and store.cache_size() == answered(judge), what="every pair asked, the calls held")
        in_flight = gate.held                       # the calls held at its death (and the survivor's): an upper bound
        procs[1].send_signal(signal.SIGKILL)        # the worker that spelled the URL differently dies
        procs[1].wait(10)
        gate.open()
        wait_until(lambda: store.get_run(run_id).status == "done", timeout=120, what="the survivor to finish")
        assert store.get_run(run_id).message == "48 grades" and store.queued_run(run_id) is None
        asked = Counter((c["prompt"], c["temperature"]) for c in judge.state.calls if c["status"] == 200)
        assert len(asked) == store.cache_size()
        assert sum(n - 1 for n in asked.values()) <= in_flight
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(60)
        store.close()


def test_a_run_no_worker_serves_says_why_and_a_worker_of_another_schema_refuses_to_start(tmp_path, pg_url, judge,
                                                                                        caplog):
    """A worker holding the key of another endpoint than the run's logs once why it skips the run, and the app's
    /status says ``queued: no worker serves judge M at URL``. A worker never starts on a database of another
    schema revision (here: one a newer release migrated), with a message that says what to do."""
    import logging

    import sqlalchemy as sa

    from mmvet_core.cli import main
    from mmvet_core.service import GradingService

    svc = GradingService(ServiceSettings(data_dir=tmp_path, database_url=pg_url, workers=EXTERNAL))
    store = Store(pg_url)
    elsewhere = Worker(store, ServiceSettings(host_key="sk-host", host_base_url="http://127.0.0.1:9/v1"), lease=5.0)
    try:
        settings = JudgeSettings(base_url=judge.url + "/", model="judge-x")
        run_id = queue_for_workers(store, tiny(3), settings)
        with caplog.at_level(logging.WARNING, logger="mmvet_grader"):
            elsewhere.tend()
            elsewhere.tend()
        said = [r.getMessage() for r in caplog.records if run_id in r.getMessage()]
        assert len(said) == 1 and f"judge judge-x at {judge.url}" in said[0] and "127.0.0.1:9/v1" in said[0]
        status = svc.reading.status(run_id)
        assert (status["status"], status["message"]) == ("queued", f"no worker serves judge judge-x at {judge.url}")
    finally:
        elsewhere.leave()
        svc.jobs.shutdown()
        svc.store.close()

    with store._tx() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = 'ffff0000newer'"))
    store.close()
    assert main(["worker", "--db", pg_url]) == 2
    with pytest.raises(Exception, match="made by a newer release.*run workers of the same release"):
        Store(pg_url, migrate=False)
