"""The command line's parser, declared as data: each command group (``cli/<group>.py``) lists its `Command`s with
their `option`s, and `build_parser` adds them in the order given. argparse without prefix matching and with "did
you mean" for a mistyped option (`Parser`)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Callable


class UsageError(Exception):
    """Bad input the user must fix (exit code 2)."""


class Parser(argparse.ArgumentParser):
    """argparse without prefix matching (``--run 2`` is not silently ``--runs 2``; every subparser inherits it)
    and with "did you mean" for a mistyped option, looked up in the subcommand that was given."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self._subparser(getattr(parsed, "command", None))
            hints = [hint for arg in extras if (hint := suggest_option(arg, command or self))]
            (command or self).error(f"unrecognized arguments: {' '.join(extras)}"
                                    + (f" ({'; '.join(hints)})" if hints else ""))
        return parsed

    def _subparser(self, name: str | None) -> argparse.ArgumentParser | None:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                return action.choices[name]
        return None


def suggest_option(arg: str, parser: argparse.ArgumentParser) -> str | None:
    """``--run: did you mean --runs?`` for an option `parser` does not know but nearly does (difflib), else None.

    >>> p = Parser(prog="x"); _ = p.add_argument("--runs"); _ = p.add_argument("--judge-model")
    >>> suggest_option("--run", p), suggest_option("--judge_model=x", p), suggest_option("--zzz", p)
    ('--run: did you mean --runs?', '--judge_model: did you mean --judge-model?', None)
    """
    import difflib

    if not arg.startswith("-"):
        return None
    flag = arg.split("=", 1)[0]
    options = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    close = difflib.get_close_matches(flag, options, n=1, cutoff=0.6)
    return f"{flag}: did you mean {close[0]}?" if close else None


@dataclass(frozen=True)
class Option:
    """One ``add_argument`` call: its flags (or positional name) and keyword arguments."""
    flags: tuple[str, ...]
    kwargs: dict


def option(*flags: str, **kwargs) -> Option:
    """An `Option`, written like ``parser.add_argument(...)``."""
    return Option(flags, kwargs)


@dataclass(frozen=True)
class Command:
    """A subcommand: its name, one-line help, options in order, and either the function that runs it
    (``run(args) -> exit code``) or its own subcommands (chosen into ``args.<subcommand_dest>``; then `run`
    dispatches on it)."""
    name: str
    help: str
    options: tuple[Option, ...] = ()
    run: Callable[[argparse.Namespace], int] | None = None
    defaults: dict = field(default_factory=dict)
    subcommands: tuple["Command", ...] = ()
    subcommand_dest: str = ""

    def add_to(self, subparsers) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(self.name, help=self.help)
        for o in self.options:
            parser.add_argument(*o.flags, **o.kwargs)
        if self.defaults:
            parser.set_defaults(**self.defaults)
        if self.subcommands:
            sub = parser.add_subparsers(dest=self.subcommand_dest, required=True)
            for command in self.subcommands:
                command.add_to(sub)
        return parser


def build_parser(commands: list[Command], **parser_kwargs) -> Parser:
    """The `Parser` with one subcommand per `Command`, in order (``args.command`` names the one given)."""
    parser = Parser(**parser_kwargs)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in commands:
        command.add_to(sub)
    return parser
