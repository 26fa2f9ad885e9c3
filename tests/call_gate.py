"""`CallGate`: the fake judge (tests/fake_judge.py) holds chat calls until the test lets them through.

A test that must see a run *while* it grades (rows streaming in, a Stop that arrives mid-run, a run still running
when fifty viewers watch it) does not slow the judge down and hope the machine is fast enough to look in time: it
holds the calls and releases them when it has seen what it waits for, so the test is the same on an idle laptop and
on a machine kept busy by other work.
"""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable


class CallGate:
    """Holds the fake judge's chat calls until the test lets them through: `release(n)` lets n more calls go on to
    be answered as the `FakeState` says (faults and latency included), `open()` every call from now on (the ones
    held included). A held call whose client hung up (a timeout, a stopped run) leaves without taking a pass.
    `peak_held` is the most calls held at once. Thread-safe: the test releases from its own thread.

    >>> gate = CallGate()
    >>> gate.release(2); gate.passes
    2
    """

    POLL_S = 0.01       # how often a held call looks for a pass (and whether its client is still there)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._arrived = 0       # calls that came to the gate so far (each call's number is its arrival's)
        self._through = 0       # calls numbered up to this one may go through (`release_held`)
        self.passes = 0         # calls that may still go through
        self.is_open = False
        self.held = 0           # calls waiting now
        self.peak_held = 0
        self.passed = 0         # calls let through so far

    def release(self, n: int = 1) -> None:
        with self._lock:
            self.passes += n

    def release_held(self) -> int:
        """Let through exactly the calls held now, however late each looks for its pass: a call that arrives
        afterwards stays held (`release(n)` gives its n passes to whichever held calls look first). Returns how
        many calls were held."""
        with self._lock:
            self._through = self._arrived
            return self.held

    def open(self) -> None:
        with self._lock:
            self.is_open = True

    async def wait(self, gone: Callable[[], object] | None = None) -> bool:
        """Wait for a pass: True once the call may answer, False when `gone()` (an awaitable) says its client left."""
        with self._lock:
            self.held += 1
            self.peak_held = max(self.peak_held, self.held)
            self._arrived += 1
            number = self._arrived
        try:
            while True:
                with self._lock:
                    if self.is_open or number <= self._through or self.passes > 0:
                        if not self.is_open and number > self._through:
                            self.passes -= 1
                        self.passed += 1
                        return True
                if gone is not None and await gone():
                    return False
                await asyncio.sleep(self.POLL_S)
        finally:
            with self._lock:
                self.held -= 1

    def wait_held(self, n: int = 1, timeout: float = 120.0) -> None:
        """(From the test's thread) wait until at least `n` calls are held at the gate."""
        self._wait(lambda: self.held >= n, timeout, lambda: f"{self.held} call(s) held at the gate, not {n}")

    def wait_passed(self, n: int, timeout: float = 120.0) -> None:
        """(From the test's thread) wait until `n` calls in all went through the gate."""
        self._wait(lambda: self.passed >= n, timeout, lambda: f"{self.passed} call(s) went through, not {n}")

    @staticmethod
    def _wait(cond: Callable[[], bool], timeout: float, what: Callable[[], str]) -> None:
        deadline = time.monotonic() + timeout      # generous: only a broken client comes near it
        while not cond():
            if time.monotonic() > deadline:
                raise TimeoutError(what())
            time.sleep(0.01)
