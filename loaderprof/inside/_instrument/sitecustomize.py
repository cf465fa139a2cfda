"""Put on a watched command's PYTHONPATH by `loaderprof watch` (NOTE [watch hook]).

Python imports the first `sitecustomize` on its path at start-up: this one installs
the DataLoader hook, then runs the one the environment had (if any), so a project's
own sitecustomize still runs. It never lets an error of its own stop the program.
"""

import importlib.machinery
import importlib.util
import os
import sys

try:
    from loaderprof.inside import hook

    hook.install()
except Exception as exc:  # the user's program runs regardless
    sys.stderr.write(f"loaderprof watch: the DataLoader hook failed to install: {exc}\n")

# The environment's own sitecustomize, imported under its own name as Python would
# have (a module or a package, source or bytecode), from the path without this one.
_here = os.path.dirname(os.path.abspath(__file__))
_path = [p for p in sys.path if os.path.abspath(p or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _path)
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["sitecustomize"] = _module
    _spec.loader.exec_module(_module)
