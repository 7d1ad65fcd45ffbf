"""The report: the same structure as ``report.json`` of ``goodput run`` (docs/report-schema.md),
wrapped in a typed object. Figures come from the Rust core; this module only reads them."""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Latency:
    """Summary of one latency in milliseconds (None when nothing was measured).

    Percentiles are nearest-rank on an HDR histogram (docs/metrics.md §2)."""

    mean: Optional[float]
    min: Optional[float]
    p50: Optional[float]
    p90: Optional[float]
    p95: Optional[float]
    p99: Optional[float]
    p999: Optional[float]
    max: Optional[float]
    count: int

    @classmethod
    def _of(cls, stats: Dict[str, Any]) -> "Latency":
        return cls(
            mean=stats.get("mean"),
            min=stats.get("min"),
            p50=stats.get("p50"),
            p90=stats.get("p90"),
            p95=stats.get("p95"),
            p99=stats.get("p99"),
            p999=stats.get("p999"),
            max=stats.get("max"),
            count=int(stats.get("count", 0)),
        )


@dataclass(frozen=True)
class Warning:
    """A methodology problem with the run, with its fix (``code`` is stable)."""

    code: str
    message: str
    fix: str


class Report:
    """A goodput report. ``to_dict()`` / ``to_json()`` give the full structure; the properties
    read the last step (a plain run or measurement has exactly one)."""

    def __init__(self, data: Dict[str, Any]):
        if not isinstance(data, dict) or "steps" not in data:
            raise ValueError("not a goodput report (no 'steps')")
        self._data = data

    @classmethod
    def from_json(cls, text: str) -> "Report":
        return cls(json.loads(text))

    @classmethod
    def load(cls, path: PathLike) -> "Report":
        """Reads a ``report.json`` (or a directory holding one)."""
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, "report.json")
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    # --- exports -----------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        """A deep copy of the report as plain Python data."""
        return copy.deepcopy(self._data)

    def to_json(self, indent: Optional[int] = 2) -> str:
        return json.dumps(self._data, indent=indent, ensure_ascii=False)

    def to_html(self, path: PathLike) -> str:
        """Writes the report as one self-contained HTML page (the same page as
        ``goodput run --out``) and returns its path."""
        from . import _native

        path = os.fspath(path)
        html = _native.render_html(json.dumps(self._data))
        with open(path, "w", encoding="utf-8") as f:
            f.write(html)
        return path

    # --- the figures -------------------------------------------------------------------
    @property
    def steps(self) -> List[Dict[str, Any]]:
        return self._data["steps"]

    @property
    def step(self) -> Dict[str, Any]:
        """The last step (the only one of a run or measurement)."""
        if not self.steps:
            raise ValueError("the report has no steps")
        return self.steps[-1]

    @property
    def end_reason(self) -> str:
        return self._data["run"]["end_reason"]

    @property
    def interrupted(self) -> bool:
        return self.end_reason == "interrupted"

    @property
    def requests_per_sec(self) -> float:
        return self.step["throughput"]["requests_per_sec"]

    @property
    def items_per_sec(self) -> float:
        return self.step["throughput"]["items_per_sec"]

    @property
    def output_tokens_per_sec(self) -> float:
        return self.step["throughput"]["output_tokens_per_sec"]

    @property
    def input_tokens_per_sec(self) -> float:
        return self.step["throughput"]["input_tokens_per_sec"]

    @property
    def e2e_ms(self) -> Latency:
        """End-to-end latency from the scheduled start (in-process: the call's duration plus
        any wait for a free worker)."""
        return Latency._of(self.step["latency_ms"]["e2e"])

    @property
    def ttft_ms(self) -> Latency:
        return Latency._of(self.step["latency_ms"]["ttft"])

    @property
    def tpot_ms(self) -> Latency:
        return Latency._of(self.step["latency_ms"]["tpot"])

    @property
    def e2e_from_send_ms(self) -> Latency:
        return Latency._of(self.step["latency_from_send_ms"]["e2e"])

    @property
    def completed(self) -> int:
        return self.step["requests"]["completed"]

    @property
    def failed(self) -> int:
        return self.step["requests"]["failed"]

    @property
    def failed_by_kind(self) -> Dict[str, int]:
        return {k: v for k, v in self.step["requests"]["failed_by_kind"].items() if v}

    @property
    def failure_examples(self) -> Dict[str, str]:
        return dict(self.step["requests"].get("failure_examples", {}))

    @property
    def windows(self) -> List[Dict[str, Any]]:
        """Per-window time series (default 1 s windows): arrivals, completions, tokens…"""
        return self.step["windows"]

    @property
    def stable(self) -> bool:
        return bool(self.step["stability"]["stable"])

    @property
    def stability(self) -> Dict[str, Any]:
        return self.step["stability"]

    @property
    def warnings(self) -> List[Warning]:
        return [Warning(w["code"], w["message"], w["fix"]) for w in self._data["warnings"]]

    @property
    def capacity(self) -> Optional[Dict[str, Any]]:
        return self._data.get("capacity")

    @property
    def tune(self) -> Optional[Dict[str, Any]]:
        """`goodput tune`'s section: each configuration, the Pareto front, the best."""
        return self._data.get("tune")

    def __repr__(self) -> str:
        return f"<goodput.Report {self.summary()}>"

    def summary(self) -> str:
        """One line: throughput, latency, failures and warnings."""
        if not self.steps:
            return f"no steps ({self.end_reason})"
        e2e = self.e2e_ms
        parts = [
            f"{self.requests_per_sec:.2f} req/s",
            f"{self.items_per_sec:.2f} items/s",
        ]
        if self.output_tokens_per_sec:
            parts.append(f"{self.output_tokens_per_sec:.1f} output tokens/s")
        if e2e.count:
            parts.append(f"e2e p50 {e2e.p50:.3f} ms p99 {e2e.p99:.3f} ms")
        parts.append(f"{self.completed} ok, {self.failed} failed")
        if self._data["warnings"]:
            parts.append("warnings: " + ", ".join(w.code for w in self.warnings))
        return "; ".join(parts)
