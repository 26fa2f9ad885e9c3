"""A crowd of share-link viewers (issue 20, hole 3), shared by tests/test_app_hostile.py and bench/crowd_bench.py.

`StatusClient` asks /status through Gradio's plain REST API (``POST /gradio_api/call/status``, then the SSE answer)
with one session, as a script does. ``python -m tests.crowd URL RUN_ID VIEWERS SECONDS`` runs `VIEWERS` viewers in
this (separate) process, each from its own address (``X-Forwarded-For: 198.51.100.N``; the app trusts one proxy
hop); once each has opened its session it prints ``ready``, then they poll the run once a second for `SECONDS`
seconds (each at least once), and it prints one JSON line: calls, viewers served, errors and latencies. A separate
process, so that the crowd's own client work does not share the app's interpreter.
"""
from __future__ import annotations

import json
import secrets
import statistics
import sys
import threading
import time


class StatusClient:
    """/status of a run over Gradio's REST API, as one visitor (`ip` in X-Forwarded-For)."""

    def __init__(self, url: str, ip: str | None = None, timeout: float = 60.0):
        import httpx

        self.http = httpx.Client(base_url=url, headers={"X-Forwarded-For": ip} if ip else {}, timeout=timeout)
        self.session_hash = secrets.token_hex(8)

    def status(self, run_id: str) -> dict:
        return self.call("status", run_id)

    def call(self, api_name: str, *data):
        """A named endpoint's answer (its first output); `RuntimeError` when it answers an error."""
        r = self.http.post(f"gradio_api/call/{api_name}", json={"data": list(data), "session_hash": self.session_hash})
        r.raise_for_status()
        event_id, event = r.json()["event_id"], None
        with self.http.stream("GET", f"gradio_api/call/{api_name}/{event_id}") as resp:
            for line in resp.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event in ("complete", "error"):
                    data = line.split(":", 1)[1].strip()
                    if event == "error":
                        raise RuntimeError(f"/{api_name} failed: {data}")
                    return json.loads(data)[0]
        raise RuntimeError(f"/{api_name}: no answer")

    def timed(self, run_id: str) -> float:
        t0 = time.perf_counter()
        self.status(run_id)
        return time.perf_counter() - t0

    def close(self) -> None:
        self.http.close()


def percentile(values: list[float], q: float) -> float:
    """The `q`-th percentile (0-100) of `values`, nearest rank (pure).

    >>> percentile([1, 2, 3, 4], 50), percentile([1, 2, 3, 4], 99)
    (2, 4)
    """
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))]


def run_crowd(url: str, run_id: str, viewers: int, seconds: float, on_ready=None) -> dict:
    """`viewers` threads, each polling `run_id` once a second. A viewer's first call opens its session (the costly
    part of a new visitor); once every viewer has made it, ``on_ready()`` is called and they poll on for
    `seconds` (each at least once). Returns the calls and latencies of the steady polling, the errors, and how
    many viewers were `served` (answered at least once by it)."""
    latencies: list[float] = []
    errors: list[str] = []
    served: set[int] = set()            # viewers answered at least once while polling
    lock = threading.Lock()
    joined = threading.Barrier(viewers + 1)
    end = [float("inf")]

    def viewer(i: int) -> None:
        client = StatusClient(url, ip=f"198.51.100.{i % 250 + 1}")
        try:
            try:
                client.status(run_id)
            except Exception as e:  # noqa: BLE001 — counted and reported
                errors.append(f"{type(e).__name__}: {e}"[:200])
            joined.wait()
            next_at = time.monotonic() + (i / max(1, viewers))      # spread over a second
            while True:                 # at least one poll, however late a busy machine runs this thread
                time.sleep(max(0.0, next_at - time.monotonic()))
                next_at += 1.0
                try:
                    took = client.timed(run_id)
                    with lock:
                        latencies.append(took)
                        served.add(i)
                except Exception as e:  # noqa: BLE001 — counted and reported
                    with lock:
                        errors.append(f"{type(e).__name__}: {e}"[:200])
                if time.monotonic() >= end[0]:
                    break
        finally:
            client.close()

    threads = [threading.Thread(target=viewer, args=(i,), daemon=True) for i in range(viewers)]
    for t in threads:
        t.start()
    end[0] = time.monotonic() + 600
    joined.wait(300)
    end[0] = time.monotonic() + seconds
    if on_ready is not None:
        on_ready()
    for t in threads:
        t.join(seconds + 120)
    return {"calls": len(latencies), "served": len(served), "errors": errors[:5], "n_errors": len(errors),
            "p50": statistics.median(latencies) if latencies else None,
            "p99": percentile(latencies, 99) if latencies else None}


if __name__ == "__main__":
    print(json.dumps(run_crowd(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]),
                               on_ready=lambda: print("ready", flush=True))), flush=True)
