"""Where a workload's time went, request by request, from the brokers' own RequestMetrics
(bench/transactions.py): each broker's /metrics scraped before and after a phase, and the
difference of the ``_count`` and ``_sum`` of every request's TotalTimeMs, LocalTimeMs and
RemoteTimeMs (the time spent waiting in a purgatory: for followers, for markers, for a
coordinator's log append), summed over the brokers, with the error codes answered."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["RequestTimes", "breakdown", "parse_request_times", "scrape_request_times"]

_PREFIX = "kafka_network_requestmetrics_"
_TIMERS = {"totaltimems": "total", "localtimems": "local", "remotetimems": "remote"}

# request -> {"requests": n, "total": ms, "local": ms, "remote": ms, "error:<NAME>": n}
Totals = dict[str, dict[str, float]]


def parse_request_times(exposition: str) -> Totals:
    """One broker's /metrics text as running totals per request name: requests answered, the
    sums of its timers in ms, and the count of each error code answered."""
    totals: Totals = {}
    for family in text_string_to_metric_families(exposition):
        if not family.name.startswith(_PREFIX):
            continue
        metric = family.name[len(_PREFIX):]
        for sample in family.samples:
            request = sample.labels.get("request")
            if request is None:
                continue
            into = totals.setdefault(request, {})
            if metric in _TIMERS and sample.name.endswith("_sum"):
                into[_TIMERS[metric]] = sample.value
            elif metric == "totaltimems" and sample.name.endswith("_count"):
                into["requests"] = sample.value
            elif metric == "errors" and sample.name.endswith("_total"):
                key = f"error:{sample.labels['error']}"
                into[key] = into.get(key, 0.0) + sample.value
    return totals


def scrape_request_times(urls: Iterable[str], timeout_s: float = 15.0) -> list[Totals]:
    """Every broker's running totals, read now."""
    out = []
    for url in urls:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            out.append(parse_request_times(response.read().decode()))
    return out


@dataclass
class RequestTimes:
    """One request's share of a phase, over all brokers: how many were answered, their time in
    all and in each part (ms, summed), and the errors answered (NONE left out)."""

    requests: int = 0
    total_ms: float = 0.0
    local_ms: float = 0.0
    remote_ms: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)

    def mean(self, part: str) -> float:
        return getattr(self, f"{part}_ms") / self.requests if self.requests else 0.0


def breakdown(before: Iterable[Mapping[str, Mapping[str, float]]],
              after: Iterable[Mapping[str, Mapping[str, float]]]) -> dict[str, RequestTimes]:
    """What happened between two scrapes of the same brokers (in the same order), by request
    name: the differences of the running totals, summed over the brokers."""
    out: dict[str, RequestTimes] = {}
    for old, new in zip(before, after, strict=True):
        for request, now in new.items():
            was = old.get(request, {})
            requests = int(now.get("requests", 0) - was.get("requests", 0))
            if requests <= 0:
                continue
            times = out.setdefault(request, RequestTimes())
            times.requests += requests
            for part in ("total", "local", "remote"):
                delta = now.get(part, 0.0) - was.get(part, 0.0)
                setattr(times, f"{part}_ms", getattr(times, f"{part}_ms") + delta)
            for key, value in now.items():
                if key.startswith("error:") and key != "error:NONE":
                    n = int(value - was.get(key, 0.0))
                    if n:
                        name = key[len("error:"):]
                        times.errors[name] = times.errors.get(name, 0) + n
    return out
