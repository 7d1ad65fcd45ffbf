"""``goodput.measure``: times a Python callable or coroutine function in-process. The Rust core
schedules the calls, stamps their start and end, and computes every figure with the
definitions of docs/metrics.md; this module only makes the calls."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from typing import Any, Callable, Dict, Optional, Sequence, Union

from . import _native
from ._report import Report

Seconds = Union[int, float, str]
_UNITS = {"ms": 1e-3, "us": 1e-6, "µs": 1e-6, "s": 1.0, "m": 60.0, "h": 3600.0}


def _seconds(name: str, value: Optional[Seconds]) -> Optional[float]:
    """Seconds from a number or a string such as ``"500ms"``, ``"10s"``, ``"2m"``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected seconds, got {value!r}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        for unit in sorted(_UNITS, key=len, reverse=True):
            if text.endswith(unit):
                try:
                    seconds = float(text[: -len(unit)]) * _UNITS[unit]
                except ValueError:
                    raise ValueError(f"{name}: cannot read {value!r} (e.g. 500ms, 10s, 2m)") from None
                break
        else:
            raise ValueError(f"{name}: cannot read {value!r} (e.g. 500ms, 10s, 2m)")
    else:
        raise TypeError(f"{name}: expected seconds, got {type(value).__name__}")
    if not seconds >= 0 or seconds == float("inf"):
        raise ValueError(f"{name}: must be a non-negative number of seconds")
    return seconds


def _count(name: str, value: Any) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    return value


def measure(
    fn: Callable[..., Any],
    inputs: Optional[Sequence[Any]] = None,
    *,
    warmup: Union[int, str, float] = 10,
    batch_size: int = 1,
    concurrency: int = 1,
    rate: Optional[float] = None,
    duration: Optional[Seconds] = None,
    requests: Optional[int] = None,
    sync: Optional[Callable[[], Any]] = None,
    items: Optional[Callable[[Any], int]] = None,
    tokens: Optional[Callable[[Any], int]] = None,
    window: Seconds = 1.0,
    slo: Optional[str] = None,
    timeout: Seconds = 300.0,
    tags: Optional[Dict[str, str]] = None,
    label: Optional[str] = None,
    seed: int = 0,
) -> Report:
    """Measures ``fn`` (a function or a coroutine function) and returns its report.

    Each call is one request: ``fn(inputs[i % len(inputs)])`` (or ``fn()`` without inputs).

    * ``warmup``: calls excluded from every figure (an int), or a duration (``"2s"``).
    * ``concurrency``: calls in flight at once (closed loop); ``rate``: calls started per
      second instead (open loop, Poisson arrivals; ``concurrency`` then caps calls in flight).
    * ``requests``: measured calls; ``duration``: how long to keep starting calls (seconds or
      ``"30s"``). Neither: one pass over ``inputs`` (10 s without inputs).
    * ``batch_size``: items per call; ``items(input)`` instead when given (e.g. ``len``).
    * ``tokens(result)``: tokens a call generated; by default a call that returns an ``int``
      generated that many tokens (tokens/s), anything else counts none.
    * ``sync``: called after every call before its end is stamped, e.g.
      ``torch.cuda.synchronize`` so asynchronous GPU work is inside the timing.
    * ``slo``: per-request thresholds, e.g. ``"e2e=50ms"`` (goodput).
    * An exception makes the call a failed request of its kind (``error``; ``timeout`` for
      ``TimeoutError``, ``transport`` for ``ConnectionError``). Ctrl-C stops the measurement
      and returns the report of what finished (``report.interrupted``).
    """
    if not callable(fn):
        raise TypeError("fn must be callable")
    data = None if inputs is None else list(inputs)
    if data is not None and not data:
        raise ValueError("inputs is empty")
    warmup_requests, warmup_secs = _warmup(warmup)
    settings = _settings(
        data, warmup_requests, warmup_secs, concurrency, rate, duration, requests, window, timeout
    )
    settings["slo"] = slo
    settings["seed"] = _count("seed", seed)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    name = label or getattr(fn, "__qualname__", None) or repr(fn)
    description = {"function": name, "inputs": None if data is None else len(data)}
    described = {
        "label": name,
        "batch_size": batch_size,
        "tags": {str(k): str(v) for k, v in (tags or {}).items()},
        "description": json.dumps(description),
    }
    counts = _counter(tokens, items)
    if inspect.iscoroutinefunction(fn):
        return _measure_coroutines(fn, data, sync, counts, settings, described)
    call = _caller(fn, data, sync, counts)
    return Report.from_json(_native.measure(call, False, settings, described))


def _warmup(warmup: Union[int, str, float]):
    if isinstance(warmup, bool):
        raise TypeError("warmup: expected a number of calls or a duration")
    if isinstance(warmup, int):
        if warmup < 0:
            raise ValueError("warmup must not be negative")
        return warmup, None
    return 0, _seconds("warmup", warmup)


def _settings(data, warmup_requests, warmup_secs, concurrency, rate, duration, requests, window, timeout):
    requests = _count("requests", requests)
    duration_secs = _seconds("duration", duration)
    if requests is None and duration_secs is None:
        if data is not None:
            requests = len(data)
        else:
            duration_secs = 10.0
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1):
        raise ValueError(f"concurrency must be a positive int, got {concurrency!r}")
    if rate is not None and not (isinstance(rate, (int, float)) and rate > 0):
        raise ValueError(f"rate must be a positive number of calls per second, got {rate!r}")
    total = None if requests is None else requests + warmup_requests
    return {
        "concurrency": concurrency,
        "rate": None if rate is None else float(rate),
        "requests": total,
        "duration_secs": duration_secs,
        "warmup_requests": warmup_requests,
        "warmup_secs": warmup_secs,
        "window_secs": _seconds("window", window),
        "timeout_secs": _seconds("timeout", timeout),
    }


def _counter(tokens, items):
    """(result, input) -> None or (tokens, items) for the core."""

    def counts(result, x):
        if tokens is not None:
            n = tokens(result)
        elif isinstance(result, int) and not isinstance(result, bool):
            n = result
        else:
            n = None
        k = None if items is None else items(x)
        if n is None and k is None:
            return None
        return (n, k)

    return counts


def _caller(fn, data, sync, counts):
    if data is None:

        def call(i):
            result = fn()
            if sync is not None:
                sync()
            return counts(result, None)

    else:
        n = len(data)

        def call(i):
            x = data[i % n]
            result = fn(x)
            if sync is not None:
                sync()
            return counts(result, x)

    return call


def _measure_coroutines(fn, data, sync, counts, settings, described) -> Report:
    """Runs the coroutines on a private event loop in a background thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="goodput-measure-loop", daemon=True)
    thread.start()
    n = None if data is None else len(data)

    async def one(i):
        x = None if data is None else data[i % n]
        result = await (fn() if data is None else fn(x))
        if sync is not None:
            sync()
        return counts(result, x)

    def submit(i, done):
        asyncio.run_coroutine_threadsafe(one(i), loop).add_done_callback(done)

    try:
        return Report.from_json(_native.measure(submit, True, settings, described))
    finally:
        loop.call_soon_threadsafe(_cancel_all, loop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.call_soon(loop.stop)
