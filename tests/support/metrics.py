"""Scraping a broker's /metrics (Prometheus's text format, parsed by prometheus_client)."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Scrape:
    """One scrape: every sample, and the names of the families (a family may have no samples yet)."""

    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]
    families: set[str]

    def value(self, name: str, default: float | None = None, **labels: str) -> float:
        """The sample ``name`` with exactly ``labels``; ``default`` when absent (else KeyError)."""
        key = (name, frozenset(labels.items()))
        if key not in self.samples and default is not None:
            return default
        return self.samples[key]

    @property
    def names(self) -> set[str]:
        """Every name a query may use: family names and sample names (``_total``, ``_count``, ...)."""
        return self.families | {name for name, _labels in self.samples}


def scrape(url: str, timeout_s: float = 15.0) -> Scrape:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    families: set[str] = set()
    for family in text_string_to_metric_families(text):
        families.add(family.name)
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return Scrape(samples, families)
