"""The ``goodput`` command that pip installs (``[project.scripts]`` in pyproject.toml) and
``python -m goodput``: the command line of crates/cli, linked into the extension module and
run in this process — the same program as the native binary, with its output, exit status
and signal handling."""

from __future__ import annotations

import signal
import sys
import threading
from typing import List, Optional

from . import _native


def main(argv: Optional[List[str]] = None) -> int:
    """Runs the goodput command line ``argv`` (default ``sys.argv``, program name first) and
    returns its exit status: 0 ok, 1 the run failed its policy, 2 bad usage, 130 interrupted.

    Meant for the console script: it gives Ctrl-C back to the command for the rest of the
    process. Where a run can stop cleanly the command catches it (cancels the requests in
    flight, writes the report, exits 130; a second Ctrl-C exits at once); elsewhere the default
    action ends the process, as it ends the native binary. Python's own handler would only
    raise ``KeyboardInterrupt`` after the command had returned."""
    args = list(sys.argv if argv is None else argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    return _native.command(args)
