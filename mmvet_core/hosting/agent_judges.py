"""Which of the server's judges an agent may pick (``MMVET_AGENT_JUDGES``): the host's rule, as pure functions.

By default a visitor who grades with the server's key gets the server's judge model (``MMVET_JUDGE_MODEL``) and
nothing else: the host pays. After the official judge's shutdown that model may be one the endpoint no longer
serves, and an agent would have to bring its own key. A host can let agents pick among the judges its endpoint
serves, with the same key and the same per-visitor budgets:

- ``MMVET_AGENT_JUDGES=judge-b,judge-c``: these models (and the default one);
- ``MMVET_AGENT_JUDGES=*``: any chat model the server's endpoint lists in its ``/v1/models``;
- unset or empty: the default judge only.

The endpoint is always the server's (an agent never points the server's key anywhere else).
"""
from __future__ import annotations

from ..judging.endpoints import ModelList, is_chat_model

__all__ = ["ANY", "parse_agent_judges", "agent_judge_refusal", "describe_agent_judges"]

ANY = "*"


def parse_agent_judges(text: str | None) -> tuple[str, ...]:
    """The host's list from the environment's text: names separated by commas or spaces, ``*`` for any.

    >>> parse_agent_judges(" judge-b, judge-c judge-b "), parse_agent_judges("*"), parse_agent_judges(None)
    (('judge-b', 'judge-c'), ('*',), ())
    """
    names: list[str] = []
    for name in (text or "").replace(",", " ").split():
        if name not in names:
            names.append(name)
    return (ANY,) if ANY in names else tuple(names)


def agent_judge_refusal(model: str, allowed: tuple[str, ...], default: str, served: ModelList | None) -> str | None:
    """Why an agent may not grade with the server's key and judge `model` (None when it may): the default judge,
    a judge the host lists, or with ``*`` a chat model the endpoint's list (`served`) names.

    >>> agent_judge_refusal("judge-b", ("judge-b",), "gpt-4-0613", None) is None
    True
    >>> agent_judge_refusal("gpt-4o", ("judge-b",), "gpt-4-0613", None)
    'This server lets agents grade with its key using gpt-4-0613 or judge-b, not gpt-4o: pick one of them, or grade with your own key (judge "own").'
    """
    if model == default or model in allowed:
        return None
    if allowed == (ANY,):
        if served is not None and served.known and served.serves(model) and is_chat_model(model):
            return None
        listed = ", ".join(m.name for m in served.chat_models()) if served is not None and served.known else ""
        return (f"The server's endpoint does not serve {model}"
                + (f" (it serves: {listed})" if listed else " (it lists no models)")
                + ': pick one it serves, or grade with your own key (judge "own").')
    names = " or ".join([default, *allowed]) if allowed else default
    return (f"This server lets agents grade with its key using {names}, not {model}: pick "
            f"{'one of them' if allowed else 'it'}, or grade with your own key (judge \"own\").")


def describe_agent_judges(allowed: tuple[str, ...], default: str) -> str:
    """One sentence for the agents' tool descriptions: which server judges they may pick.

    >>> describe_agent_judges(("judge-b",), "gpt-4-0613")
    'With judge "server" this server lets you pick judge_model among: gpt-4-0613 (its default), judge-b.'
    >>> describe_agent_judges((), "gpt-4-0613")
    'With judge "server" this server grades with its default judge gpt-4-0613 only.'
    """
    if not allowed:
        return f'With judge "server" this server grades with its default judge {default} only.'
    if allowed == (ANY,):
        return (f'With judge "server" this server lets you pick judge_model among the chat models its endpoint '
                f"serves (default {default}).")
    return (f'With judge "server" this server lets you pick judge_model among: {default} (its default), '
            f"{', '.join(allowed)}.")
