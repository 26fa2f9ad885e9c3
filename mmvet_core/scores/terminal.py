"""Reports that fit a terminal: every line the CLI prints is at most `REPORT_WIDTH` columns by default (issue 32
part 4). Tables are laid out to fit; prose is wrapped here, a continuation indented like its first line. Pure."""
from __future__ import annotations

import textwrap
from typing import Iterable

#: The width of the CLI's reports (a terminal's usual width; ``--wide`` tables may go beyond it).
REPORT_WIDTH = 100


def fit_lines(lines: Iterable[str], width: int | None = REPORT_WIDTH) -> list[str]:
    """Each line of `lines` (a line may hold newlines) wrapped at `width` columns on spaces; a continuation is
    indented two columns deeper than its line. `width` None leaves the lines as they are. A word longer than
    the width (a path, a URL) stays whole on its own line rather than being cut.

    >>> fit_lines(["  " + "word " * 30], 40)[:2]
    ['  word word word word word word word', '    word word word word word word word']
    >>> fit_lines(["short", ""], 40)
    ['short', '']
    """
    out: list[str] = []
    for text in lines:
        for line in str(text).split("\n"):
            if width is None or len(line) <= width:
                out.append(line)
                continue
            indent = line[:len(line) - len(line.lstrip())]
            out += textwrap.wrap(line.strip(), width=width, initial_indent=indent,
                                 subsequent_indent=indent + "  ", break_long_words=False,
                                 break_on_hyphens=False) or [""]
    return out


def fit(text: str, width: int | None = REPORT_WIDTH) -> str:
    """`fit_lines` of a whole text, joined again."""
    return "\n".join(fit_lines([text], width))


def pack(label: str, items: Iterable[str], width: int | None = REPORT_WIDTH, sep: str = "  ") -> list[str]:
    """``label item  item  item`` over as many lines as `width` needs, items never cut (continuations indented
    two columns).

    >>> pack("Capabilities:", ["rec 35.7 [29.5, 41.9]", "ocr 24.0 [17.0, 31.7]", "know 21.1 [16.9, 25.7]"], 50)
    ['Capabilities: rec 35.7 [29.5, 41.9]', '  ocr 24.0 [17.0, 31.7]  know 21.1 [16.9, 25.7]']
    """
    lines, line = [], label
    for item in items:
        joined = f"{line}{' ' if line == label else sep}{item}" if line.strip() else f"{line}{item}"
        if width is not None and len(joined) > width and line.strip() and line != label:
            lines.append(line)
            joined = f"  {item}"
        line = joined
    lines.append(line)
    return lines
