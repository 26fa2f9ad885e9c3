"""What a visitor types for a leaderboard entry, bounded and inert: its display name (`clean_display_name`: one line
of visible text, `mmvet_core.board.names`), an optional ``https://`` link (`check_link`), and a run's model name
frozen into an entry (`visible_text`). `BoardError` is the refusal every board module raises: its message says
what to do (shown to visitors as a toast).
"""
from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

from .names import NameRefused, check_visible_name, is_invisible

#: Bounds of what a visitor types.
MAX_DISPLAY_NAME = 80
MAX_LINK = 300


class BoardError(ValueError):
    """A refused leaderboard action or input; the message says what to do (shown to visitors as a toast)."""


def clean_display_name(name: object) -> str:
    """A display name: one line of plain visible text (`names.check_visible_name`: whitespace collapsed, and
    refused when it holds an invisible or formatting character, shows nothing or stacks accents), at most
    `MAX_DISPLAY_NAME` characters. It stays text everywhere (never markup): the view shows it in a table cell,
    the CSV download neutralises formulas. Raises `BoardError` naming the fault.

    >>> clean_display_name("  LLaVA\\n 1.5  13b ")
    'LLaVA 1.5 13b'
    """
    try:
        text = check_visible_name(name)
    except NameRefused as e:
        raise BoardError(str(e)) from None
    if not text:
        raise BoardError("Give the entry a display name.")
    if len(text) > MAX_DISPLAY_NAME:
        raise BoardError(f"A display name has at most {MAX_DISPLAY_NAME} characters ({len(text)} given).")
    return text


def visible_text(text: object, limit: int = 300) -> str:
    """`text` with its invisible and formatting characters dropped, whitespace collapsed, bounded: for a run's
    model name frozen into an entry (shown on its card, never its identity on the board)."""
    kept = "".join(ch for ch in unicodedata.normalize("NFC", str(text or "")) if not is_invisible(ch))
    return re.sub(r"\s+", " ", kept).strip()[:limit]


_LINK_CHARS = re.compile(r"^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+$")


def check_link(url: object) -> str:
    """An optional link (paper, model card): ``""`` or an ``https://host/...`` URL of at most `MAX_LINK`
    characters, with no credentials, spaces, quotes or angle brackets. Anything else (``javascript:``, ``data:``,
    ``http:``, a relative path) raises `BoardError`.

    >>> check_link(" https://arxiv.org/abs/2308.02490 "), check_link("")
    ('https://arxiv.org/abs/2308.02490', '')
    """
    text = str(url if url is not None else "").strip()
    if not text:
        return ""
    if len(text) > MAX_LINK:
        raise BoardError(f"A link has at most {MAX_LINK} characters.")
    if not _LINK_CHARS.match(text):
        raise BoardError("A link may not contain spaces, quotes or angle brackets.")
    parts = urlsplit(text)
    if parts.scheme.lower() != "https" or not text.lower().startswith("https://"):
        raise BoardError("Only https:// links are accepted (a paper or a model card).")
    if not parts.hostname or parts.username is not None or parts.password is not None:
        raise BoardError("A link needs a host name and no user name or password.")
    return text
