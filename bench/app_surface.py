"""Dump what the app exposes — the Gradio config (components, ids, events, their inputs and outputs) and the API
info (named endpoints and their parameters) — as one JSON file, so that a refactor can be shown to change none of
it: run it before and after, then diff the two files.

    python bench/app_surface.py /tmp/before.json    # on the old commit
    python bench/app_surface.py /tmp/after.json     # on the new one
    diff /tmp/before.json /tmp/after.json && echo same

Values that differ from one build to the next (the browser-state secret, temporary paths, object addresses) are
normalised. The app is built on a temporary data folder with no judge key; nothing is launched.
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def normalised(value, tmp: str):
    """`value` with per-build values replaced: secrets dropped, the temporary folder and addresses masked."""
    if isinstance(value, dict):
        return {k: normalised(v, tmp) for k, v in value.items() if k not in ("app_id", "secret")}
    if isinstance(value, (list, tuple)):
        return [normalised(v, tmp) for v in value]
    if isinstance(value, str):
        return re.sub(r" at 0x[0-9a-f]+", "", value.replace(tmp, "<TMP>"))
    if callable(value):
        return f"<callable {getattr(value, '__qualname__', type(value).__name__)}>"
    return value


def main(out: str) -> None:
    os.environ.pop("OPENAI_API_KEY", None)
    import app
    with tempfile.TemporaryDirectory() as tmp:
        demo = app.build_demo(app.AppSettings(data_dir=Path(tmp) / "data"))
        surface = {"config": normalised(demo.get_config_file(), tmp),
                   "api_info": normalised(demo.get_api_info(), tmp)}
        demo.svc.jobs.shutdown()
    Path(out).write_text(json.dumps(surface, indent=1, sort_keys=True, default=str))
    print(f"{out}: {len(surface['config']['components'])} components, "
          f"{len(surface['config']['dependencies'])} events, {len(surface['api_info']['named_endpoints'])} "
          "named endpoints")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "app-surface.json")
