"""``python -m mmvet_core``: see `mmvet_core.cli`."""
import sys

from .cli import main

sys.exit(main())
