"""Benchmark images as the app shows them: decoded and re-encoded, never served as the uploaded bytes.

An uploaded benchmark's image files are the visitor's bytes under a name the visitor chose. They are never
served from disk: `load_display_image` decodes one with PIL (a known raster format, bounded pixels) and returns a
fresh in-memory image, which the UI re-encodes into its own cache. Whatever the file really held (HTML, SVG,
script, a polyglot), what reaches a browser is pixels encoded by us.
"""
from __future__ import annotations

import warnings
from pathlib import Path

__all__ = ["ALLOWED_FORMATS", "MAX_PIXELS", "load_display_image"]

ALLOWED_FORMATS = frozenset({"PNG", "JPEG", "GIF", "BMP", "WEBP"})
MAX_PIXELS = 40_000_000          # a 6,000 x 6,000 photo is 36 M; decompression bombs are far larger
MAX_SIDE = 1600                  # shown at most this large (the detail view is 240 px high)


def load_display_image(path: str | Path | None, *, max_pixels: int = MAX_PIXELS):
    """A re-encodable RGB(A) copy of the image at `path`, at most `MAX_SIDE` pixels a side, or None when there is
    no file, it is not one of `ALLOWED_FORMATS`, it declares more than `max_pixels` pixels, or it does not
    decode."""
    if not path:
        return None
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)      # refused, not merely logged
            im = Image.open(path)
        with im:
            if im.format not in ALLOWED_FORMATS or im.width * im.height > max_pixels:
                return None
            im.draft("RGB", (MAX_SIDE, MAX_SIDE))             # JPEG: decode at a reduced size when large
            out = im.convert("RGBA" if "A" in im.getbands() or "transparency" in im.info else "RGB")
    except (OSError, ValueError, UnidentifiedImageError, Image.DecompressionBombError,
            Image.DecompressionBombWarning, SyntaxError):
        return None
    out.thumbnail((MAX_SIDE, MAX_SIDE))
    return out
