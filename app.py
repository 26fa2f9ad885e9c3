"""The Space's entry point (README: ``app_file: app.py``): the app is built in `mmvet_app.app`; ``python app.py``
serves it (as ``mmvet-grader app`` does once installed). ``import app`` is `mmvet_app.app` itself."""
import sys

import mmvet_app.app as _app

if __name__ == "__main__":
    _app.main()
else:
    sys.modules[__name__] = _app
