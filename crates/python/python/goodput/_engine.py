"""``goodput.run`` / ``goodput.capacity`` / ``goodput.sweep``: the command line's engine from
Python. Each starts the ``goodput`` command installed with this package in the background
(so a notebook stays responsive) and returns a :class:`Run` handle whose ``wait()`` — or
``await`` — gives the same :class:`Report` as ``report.json``. Stopping it (``stop()``, or
Ctrl-C while waiting) interrupts the command the way Ctrl-C does on a terminal: it cancels the
requests in flight and still writes the report."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from typing import Any, Dict, List, Optional

from ._report import Report

#: Options whose plain numbers are seconds (``duration=30`` is ``--duration 30s``).
_DURATIONS = {
    "duration",
    "request_timeout",
    "no_progress_timeout",
    "window",
    "step_duration",
}


class GoodputError(RuntimeError):
    """The goodput command could not run (bad options, unreachable target…)."""


def binary() -> str:
    """The path of the ``goodput`` command: ``$GOODPUT_BIN``, else the one installed with this
    package (the environment's scripts directory: pip's console script, which runs the command
    in-process through the extension module), else ``goodput`` on ``PATH``."""
    explicit = os.environ.get("GOODPUT_BIN")
    if explicit:
        return explicit
    name = "goodput.exe" if sys.platform == "win32" else "goodput"
    for scheme_dir in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = os.path.join(scheme_dir, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("goodput")
    if found:
        return found
    raise GoodputError("the goodput command is not installed (reinstall the goodput wheel or set GOODPUT_BIN)")


def flags(options: Dict[str, Any]) -> List[str]:
    """Command-line flags from keyword options: ``rate=20`` → ``--rate=20``, ``no_stream=True``
    → ``--no-stream``, ``duration=30`` → ``--duration=30s``, ``tags={"gpu": "H100"}`` →
    ``--tag=gpu=H100``, lists repeat the flag; ``None`` and ``False`` are left out."""
    args: List[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if key == "tags":
            args += [f"--tag={k}={v}" for k, v in dict(value).items()]
        elif value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args += [f"{flag}={item}" for item in value]
        elif key in _DURATIONS and isinstance(value, (int, float)):
            args.append(f"{flag}={value}s")
        else:
            args.append(f"{flag}={value}")  # `=`: a value may start with '-'
    return args


class Run:
    """A goodput command running in the background."""

    def __init__(self, command: str, options: Dict[str, Any], out: Optional[str] = None):
        self.out = os.fspath(out) if out is not None else tempfile.mkdtemp(prefix=f"goodput-{command}-")
        os.makedirs(self.out, exist_ok=True)
        self.args = [binary(), command, *flags(options), "--out", self.out]
        if command == "run":
            # Only `run` has a live view (stdout is a log file here anyway).
            self.args.append("--no-live")
        self._log_path = os.path.join(self.out, "goodput.log")
        self._log = open(self._log_path, "wb")
        # Its own session: a terminal's Ctrl-C reaches only Python, which forwards exactly one
        # interrupt (a second one would make the command exit without its report).
        self._process = subprocess.Popen(
            self.args,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._report: Optional[Report] = None

    def done(self) -> bool:
        return self._process.poll() is not None

    @property
    def returncode(self) -> Optional[int]:
        """0 ok, 1 the run failed its policy, 2 bad usage, 130 interrupted (None: running)."""
        return self._process.poll()

    @property
    def log(self) -> str:
        """What the command printed so far (progress lines, the summary table)."""
        if not self._log.closed:
            self._log.flush()
        with open(self._log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self) -> Report:
        """Interrupts the run (like Ctrl-C) and returns the report of what finished."""
        if not self.done():
            self._process.send_signal(signal.SIGINT)
        return self.wait()

    def wait(self, timeout: Optional[float] = None) -> Report:
        """Waits for the end and returns the report; Ctrl-C while waiting stops the run and
        still returns its report."""
        if self._report is not None:
            return self._report
        try:
            self._process.wait(timeout)
        except KeyboardInterrupt:
            self._process.send_signal(signal.SIGINT)
            self._process.wait()
        self._log.close()
        path = os.path.join(self.out, "report.json")
        if not os.path.exists(path):
            raise GoodputError(f"goodput exited with status {self._process.returncode} without a report:\n{self.log}")
        self._report = Report.load(path)
        return self._report

    def __await__(self):
        return asyncio.get_running_loop().run_in_executor(None, self.wait).__await__()

    def __repr__(self) -> str:
        state = "running" if not self.done() else f"exited {self.returncode}"
        return f"<goodput.Run {' '.join(self.args[1:3])} … ({state}) out={self.out}>"


def run(target: Optional[str] = None, *, out: Optional[str] = None, **options: Any) -> Run:
    """Starts ``goodput run`` in the background; every option of ``goodput run --help`` is a
    keyword (``rate=20``, ``concurrency=8``, ``duration="2m"``, ``slo="ttft=500ms"``…).
    Without ``target`` it benchmarks the embedded simulator. ``run(...).wait()`` (or
    ``await run(...)``) returns the report."""
    return Run("run", {"target": target, **options}, out)


def capacity(target: Optional[str] = None, *, out: Optional[str] = None, **options: Any) -> Run:
    """Starts ``goodput capacity`` (the highest load at which the queue stays stable and the SLO
    holds) in the background; the report's ``capacity`` section holds the verdict."""
    return Run("capacity", {"target": target, **options}, out)


def sweep(target: Optional[str] = None, *, out: Optional[str] = None, **options: Any) -> Run:
    """Starts ``goodput sweep`` (one measured step per load level, and the knee)."""
    return Run("sweep", {"target": target, **options}, out)
