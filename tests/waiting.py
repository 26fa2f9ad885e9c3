"""Waiting for an event in a test: poll a condition until it holds, with a generous deadline that only a broken
program comes near (a test waits for events, never for a wall-clock window)."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

import pytest

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 120.0, what: str | Callable[[], str] = "the condition",
               *, every: float = 0.02) -> T:
    """`condition()`'s first truthy value, polled every `every` seconds. Fails the test after `timeout` seconds,
    naming `what` (a text, or a function that says what the state was at the deadline)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what() if callable(what) else what}")
        time.sleep(every)
    return value
