"""DCGM telemetry from a Prometheus server that scrapes dcgm-exporter.

Queries (PromQL; see docs/telemetry.md): a range query over the window for
DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_XID_ERRORS, instant queries for memory,
engine activity, power and temperature, and ``timestamp(DCGM_FI_DEV_GPU_UTIL)``
for how fresh each GPU's data is. A GPU is identified by (Hostname or hostname,
gpu). Answers are untrusted: given a URL, every request is bounded in time, size
and depth (`gpu_policy.telemetry.http`); given a `PrometheusConnect`, its queries
run through it (`gpu_policy.telemetry.client`), within its read timeout. Either
way each query is retried with backoff, the whole collection has one deadline,
and NaN, infinite and DCGM-blank values count as missing. When it fails,
`TelemetryUnavailable` says why in one line, with the URL's secrets redacted.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from gpu_policy.backoff import Backoff
from gpu_policy.errors import GpuPolicyError, UsageError
from gpu_policy.telemetry.client import client_result
from gpu_policy.telemetry.http import HttpFailure, get_json, redact_url
from gpu_policy.model.telemetry import (
    ENGINE_ACTIVE, FB_FREE, FB_USED, GPU_UTIL, INSTANT_SERIES, POWER, TEMPERATURE, XID_ERRORS, GpuKey, GpuReading,
    GpuTelemetry, TelemetrySettings, is_blank)


class TelemetryUnavailable(GpuPolicyError):
    """Prometheus could not be read; the planner goes on without telemetry."""


class _Malformed(Exception):
    """Prometheus answered with data that is not what its API promises."""


_FIELD = {FB_USED: "memory_used_mib", FB_FREE: "memory_free_mib", ENGINE_ACTIVE: "engine_active",
          POWER: "power_w", TEMPERATURE: "temperature_c"}


def _key(labels: dict) -> GpuKey:
    host = labels.get("Hostname") or labels.get("hostname")
    gpu = labels.get("gpu")
    if not isinstance(host, str) or not isinstance(gpu, str) or not gpu.isdigit() or len(gpu) > 6:
        raise _Malformed(f"a DCGM series without Hostname/hostname or gpu labels: {sorted(labels)[:8]}")
    return GpuKey(host, int(gpu))


def _value(text: Any) -> float | None:
    """A sample's value; None for what is not a finite reading (NaN, Inf, DCGM's blanks)."""
    if not isinstance(text, (str, int, float)) or isinstance(text, bool):
        raise _Malformed(f"a sample value is not a number: {str(text)[:40]}")
    try:
        value = float(text)
    except ValueError:
        raise _Malformed(f"a sample value is not a number: {str(text)[:40]}") from None
    return None if is_blank(value) else value


def _time(text: Any) -> float:
    value = _value(text)
    if value is None:
        raise _Malformed(f"a sample time is not a finite number: {str(text)[:40]}")
    return value


def _pair(sample: Any) -> tuple[float, float | None]:
    if not isinstance(sample, list) or len(sample) != 2:
        raise _Malformed("a sample is not a [time, value] pair")
    return _time(sample[0]), _value(sample[1])


def _series(result: Any, key: str) -> list[tuple[dict, Any]]:
    """The (labels, samples) of a result list; labels are text, and name a GPU."""
    if not isinstance(result, list):
        raise _Malformed("the result is not a list of series")
    out = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict) or key not in item:
            raise _Malformed(f"a series lacks its metric or {key}")
        labels = item["metric"]
        if not all(isinstance(v, str) for v in labels.values()):
            raise _Malformed("a series has labels that are not text")
        _key(labels)
        out.append((labels, item[key]))
    return out


def _range(samples: Any) -> list[tuple[float, float | None]]:
    if not isinstance(samples, list):
        raise _Malformed("a range series has no list of values")
    return [_pair(s) for s in samples]


class PrometheusDcgmSource:
    """Reads dcgm-exporter series from Prometheus: `prometheus` is its URL (read by gpu-policy's
    bounded client; credentials in the URL are sent as Basic auth and redacted everywhere
    else), or a `PrometheusConnect` of the caller's (prometheus-api-client), whose queries run
    through it with its own auth, headers, TLS and proxy."""

    def __init__(self, prometheus, settings: TelemetrySettings | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        if isinstance(prometheus, str):
            self.client, self.url = None, prometheus.rstrip("/")
        elif callable(getattr(prometheus, "custom_query", None)) and isinstance(getattr(prometheus, "url", None), str):
            self.client, self.url = prometheus, prometheus.url.rstrip("/")
        else:
            raise UsageError(f"prometheus: must be a URL or a prometheus_api_client.PrometheusConnect, "
                             f"got {type(prometheus).__name__}")
        self.settings = settings or TelemetrySettings()
        self._sleep, self._clock = sleep, clock
        self._deadline = math.inf

    @property
    def shown_url(self) -> str:
        return redact_url(self.url)

    def collect(self, settings: TelemetrySettings | None = None) -> GpuTelemetry:
        s = settings or self.settings
        self._deadline = self._clock() + s.total_timeout_s
        now = time.time()
        span = {"start": f"{now - s.span_s:.3f}", "end": f"{now:.3f}", "step": f"{s.step():g}s"}
        gpus: dict[GpuKey, GpuReading] = {}

        def reading(labels: dict) -> GpuReading:
            r = gpus.setdefault(_key(labels), GpuReading())
            r.model = r.model or labels.get("modelName")
            r.uuid = r.uuid or labels.get("UUID")
            r.pod = r.pod or labels.get("pod")
            r.namespace = r.namespace or labels.get("namespace")
            return r

        for labels, samples in self._query("query_range", {"query": GPU_UTIL, **span},
                                           f"{GPU_UTIL} over {s.window_s:g} s", "values", s):
            reading(labels).utilization = [(t, v) for t, v in _range(samples) if v is not None]
        for labels, sample in self._query("query", {"query": f"timestamp({GPU_UTIL})"},
                                          f"timestamp({GPU_UTIL})", "value", s):
            reading(labels).last_seen = _pair(sample)[1]
        for labels, samples in self._query("query_range", {"query": XID_ERRORS, **span}, XID_ERRORS, "values", s):
            reading(labels).xids = sorted({(t, int(v), labels.get("err_msg", "")) for t, v in _range(samples)
                                           if v is not None and 0 < v < 2 ** 31})
        for series in INSTANT_SERIES:
            for labels, sample in self._query("query", {"query": series}, series, "value", s):
                setattr(reading(labels), _FIELD[series], _pair(sample)[1])
        return GpuTelemetry(source=f"prometheus {self.shown_url}", collected_at=now, window_s=s.window_s, gpus=gpus)

    def _query(self, endpoint: str, params: dict[str, str], what: str, key: str,
               s: TelemetrySettings) -> list[tuple[dict, Any]]:
        """Run one query with bounded retries; every failure ends as TelemetryUnavailable."""
        backoff = Backoff(s.backoff_s, sleep=self._sleep, monotonic=self._clock)
        problem = ""
        for attempt in range(s.retries + 1):
            if attempt:
                backoff.pause()
            left = self._deadline - self._clock()
            if left <= 0:
                problem = f"did not finish within the {s.total_timeout_s:g} s of a collection"
                break
            try:
                return _series(self._result(endpoint, params, min(s.timeout_s, left), s), key)
            except HttpFailure as e:
                problem = e.problem
                if not e.retry:
                    break
            except _Malformed as e:
                problem = f"sent malformed data ({str(e)[:120]})"
        raise TelemetryUnavailable(f"Prometheus at {self.shown_url} {problem} for {what} "
                                   f"after {attempt + 1} attempt{'s' if attempt else ''}")

    def _result(self, endpoint: str, params: dict[str, str], timeout_s: float, s: TelemetrySettings) -> Any:
        """The `data.result` of one query, through the caller's client or the bounded one."""
        if self.client is not None:
            return client_result(self.client, endpoint, params, timeout_s)
        answer = get_json(self.url, f"/api/v1/{endpoint}", params, timeout_s=timeout_s, max_bytes=s.max_answer_bytes,
                          verify_tls=s.verify_tls)
        if not isinstance(answer, dict) or answer.get("status") != "success" or not isinstance(answer.get("data"), dict):
            raise _Malformed(f"the answer is not a successful query result: {str(answer)[:80]}")
        return answer["data"].get("result")
