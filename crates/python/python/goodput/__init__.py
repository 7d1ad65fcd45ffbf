"""goodput from Python.

* ``goodput.measure(fn, inputs, ...)`` times any function or coroutine function in-process
  (latency percentiles, requests/s, items/s, tokens/s, per-second windows, stability,
  methodology warnings), measured by goodput's Rust core with the command line's definitions.
* ``goodput.run(...)`` / ``goodput.capacity(...)`` / ``goodput.sweep(...)`` run the ``goodput``
  command installed with this package in the background and return a handle whose ``wait()``
  (or ``await``) gives the report.
* The ``goodput`` command itself (``goodput._cli.main``, pip's console script and ``python -m
  goodput``): the Rust command line linked into ``goodput._native``, run in-process.

Both return a :class:`Report` (``.to_dict()``, ``.to_json()``, ``.to_html(path)``).
See docs/python.md.
"""

from . import _native
from ._engine import GoodputError, Run, binary, capacity, run, sweep
from ._measure import measure
from ._report import Latency, Report, Warning

__version__ = _native.__version__

__all__ = [
    "GoodputError",
    "Latency",
    "Report",
    "Run",
    "Warning",
    "binary",
    "capacity",
    "measure",
    "run",
    "sweep",
]
