"""`app`: serve the app (``mmvet-grader app``, as ``python app.py`` in a checkout). The core never imports Gradio:
the app's module (`mmvet_app.app`, installed beside the core by ``pip install``) is imported by name, only when
this command runs."""
from __future__ import annotations

import importlib
import os

from .parser import Command, UsageError, option

#: The module that builds and launches the page (its `main()` reads GRADIO_SERVER_NAME / GRADIO_SERVER_PORT).
APP_MODULE = "mmvet_app.app"


def cmd_app(args) -> int:
    try:
        app = importlib.import_module(APP_MODULE)
    except ModuleNotFoundError as e:
        if e.name and (e.name == APP_MODULE or APP_MODULE.startswith(e.name + ".")):
            raise UsageError(f"the app's views ({APP_MODULE}) are not installed: pip install the repository "
                             "(pip install .), or run python app.py in a checkout") from e
        raise UsageError(f"the app needs the package {e.name!r}: pip install -r requirements.txt") from e
    if args.host:
        os.environ["GRADIO_SERVER_NAME"] = args.host
    if args.port is not None:
        os.environ["GRADIO_SERVER_PORT"] = str(args.port)
    app.main()
    return 0


APP = Command("app", "serve the app on http://localhost:7860 (the page, its API for scripts and MCP for agents; "
                     "settings from the environment: docs/app.md)", (
    option("--host", default=None, help="address to listen on (default $GRADIO_SERVER_NAME, else 0.0.0.0)"),
    option("--port", type=int, default=None, help="port (default $GRADIO_SERVER_PORT, else 7860)"),
), run=cmd_app)
