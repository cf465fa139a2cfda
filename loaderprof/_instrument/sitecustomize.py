"""Put on a watched command's PYTHONPATH by `loaderprof watch` (NOTE [watch hook]).

Python imports the first `sitecustomize` on its path at start-up: this one installs
the DataLoader hook, then runs the one the environment had (if any), so a project's
own sitecustomize still runs. It never lets an error of its own stop the program.
"""

import importlib.util
import os
import sys

try:
    from loaderprof import hook

    hook.install()
except Exception as exc:  # the user's program runs regardless
    sys.stderr.write(f"loaderprof watch: the DataLoader hook failed to install: {exc}\n")

_here = os.path.dirname(os.path.abspath(__file__))
for _entry in sys.path:
    if os.path.abspath(_entry or ".") == _here:
        continue
    _candidate = os.path.join(_entry or ".", "sitecustomize.py")
    if os.path.isfile(_candidate):
        _spec = importlib.util.spec_from_file_location("_chained_sitecustomize", _candidate)
        if _spec is not None and _spec.loader is not None:
            _spec.loader.exec_module(importlib.util.module_from_spec(_spec))
        break
