"""`HeldCalls`: hold a call the app's handler makes to a service method until the test lets it go, to put two
events of one page in the order a busy server can give them (the event the test needs, never a wall-clock wait)."""
from __future__ import annotations

import sys
import threading
from typing import Callable


def called_from(*names: str) -> Callable[[], bool]:
    """A `HeldCalls` condition: true when a function named in `names` is on the calling thread's stack (a view's
    handler that the held method is called from, for example)."""
    wanted = set(names)

    def check() -> bool:
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_name in wanted:
                return True
            frame = frame.f_back
        return False
    return check


def not_called_from(*names: str) -> Callable[[], bool]:
    """True when no function named in `names` is on the calling thread's stack."""
    inside = called_from(*names)
    return lambda: not inside()


class HeldCalls:
    """Holds the first call of `obj.name` (a service method a handler calls) for which `when()` is true (every
    call by default) until the block ends; later calls go through. `wait_entered(n)`: wait until `n` such calls
    have begun."""

    def __init__(self, obj, name: str, when: Callable[[], bool] | None = None):
        self.obj, self.name, self.original = obj, name, getattr(obj, name)
        self.own = name in vars(obj)                # an attribute of the object itself, not its class's method
        self.when = when
        self.entered = 0
        self.changed = threading.Condition()
        self.release = threading.Event()

    def __enter__(self) -> "HeldCalls":
        def held(*args, **kwargs):
            if self.when is not None and not self.when():
                return self.original(*args, **kwargs)
            with self.changed:
                self.entered += 1
                first = self.entered == 1
                self.changed.notify_all()
            if first:
                self.release.wait(60)
            return self.original(*args, **kwargs)
        setattr(self.obj, self.name, held)
        return self

    def wait_entered(self, n: int, timeout: float = 30.0) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.entered >= n, timeout), \
                f"{n} call(s) of {self.name} expected on the server, {self.entered} came"

    def __exit__(self, *exc) -> None:
        self.release.set()
        if self.own:
            setattr(self.obj, self.name, self.original)
        else:
            delattr(self.obj, self.name)
