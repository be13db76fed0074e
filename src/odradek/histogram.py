"""Kafka's timers and histograms (Yammer's ``Histogram``) as the JMX exporter reads them, sans-IO.

The exporter's standard Kafka rules turn a histogram into a count and its percentiles
(50th, 75th, 95th, 98th, 99th, 999th, as ``quantile="0.50"`` ... ``"0.999"``).  Yammer keeps
an exponentially decaying reservoir of 1028 samples biased to the last five minutes; a ring
of the last :data:`RESERVOIR_SIZE` samples gives the same picture of a broker under steady
load and costs one store per sample into an array of doubles, which matters on the request
path (and a batch of samples, :meth:`Histogram.extend`, costs two slice stores).  Quantiles are
computed only when asked (at scrape time).
"""

from __future__ import annotations

from array import array
from typing import Final

__all__ = ["QUANTILES", "RESERVOIR_SIZE", "Histogram"]

RESERVOIR_SIZE: Final = 1024
# (label, fraction): Yammer's Snapshot percentiles, labelled as the exporter's rules do ("0.$N").
QUANTILES: Final = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98),
                    ("0.99", 0.99), ("0.999", 0.999))


class Histogram:
    """A count, a sum and the recent samples of one measured quantity (milliseconds, mostly)."""

    __slots__ = ("_next", "_samples", "count", "sum")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        # Doubles in one block, not float objects: thousands of small objects that outlive the
        # requests around them scatter the allocator's pools those requests use (a broker with
        # metrics measured dearer per request than switching them off in it explains; see
        # docs/DESIGN.md "Metrics").
        self._samples = array("d")
        self._next = 0  # where the next sample goes once the ring is full

    def update(self, value: float) -> None:
        """Record one sample."""
        self.count += 1
        self.sum += value
        samples = self._samples
        if len(samples) < RESERVOIR_SIZE:
            samples.append(value)
        else:
            samples[self._next] = value
            self._next = (self._next + 1) % RESERVOIR_SIZE

    def extend(self, values: list[float]) -> None:
        """Record a batch of samples, oldest first (the same as :meth:`update` on each)."""
        if values:
            self.add_batch(len(values), sum(values), values[-RESERVOIR_SIZE:])

    def add_batch(self, count: int, total: float, values: list[float]) -> None:
        """Record ``count`` samples that sum to ``total``, of which ``values`` are the last
        (oldest first; all of them, or at least the last RESERVOIR_SIZE): the same as
        :meth:`extend` on all of them, for a caller that has the sum cheaper than each sample."""
        if not count:
            return
        self.count += count
        self.sum += total
        samples = self._samples
        batch = array("d", values[-RESERVOIR_SIZE:])
        room = RESERVOIR_SIZE - len(samples)
        if room > 0:
            samples.extend(batch[:room])
            batch = batch[room:]
        start = self._next
        end = start + len(batch)
        if end <= RESERVOIR_SIZE:
            samples[start:end] = batch
        else:
            wrap = RESERVOIR_SIZE - start
            samples[start:] = batch[:wrap]
            samples[:end - RESERVOIR_SIZE] = batch[wrap:]
        self._next = end % RESERVOIR_SIZE

    def quantiles(self) -> list[tuple[str, float]]:
        """(label, value) for each of :data:`QUANTILES` over the recent samples; zeros when
        there are none (Yammer's empty snapshot)."""
        ordered = sorted(self._samples)
        return [(label, _quantile(ordered, q)) for label, q in QUANTILES]


def _quantile(ordered: list[float], q: float) -> float:
    """Yammer's ``Snapshot.getValue``: the (n + 1) * q-th sample, interpolated between neighbours."""
    n = len(ordered)
    if n == 0:
        return 0.0
    pos = q * (n + 1)
    if pos < 1:
        return ordered[0]
    if pos >= n:
        return ordered[-1]
    lower = ordered[int(pos) - 1]
    upper = ordered[int(pos)]
    return lower + (pos - int(pos)) * (upper - lower)
