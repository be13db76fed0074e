"""Kafka's ``Rate`` over a ``SampledStat`` (org.apache.kafka.common.metrics.stats), sans-IO.

The rate is the sum of what was recorded in the last ``samples`` windows of ``window_ms``
each, divided by the time they span.  A sample starts when the first value after the previous
one's window arrives (windows are not aligned to the clock), and one older than ``samples``
windows counts nothing.  While fewer than ``samples - 1`` whole windows have passed since the
oldest live sample began, the span is taken as ``samples - 1`` windows: a client's first
second of traffic is spread over ten seconds, not measured as a burst.
"""

from __future__ import annotations

__all__ = ["SampledRate"]


class SampledRate:
    """Values recorded over time and their rate per second (see the module docstring)."""

    __slots__ = ("_current", "_starts", "_values", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        if samples < 1 or window_ms < 1:
            raise ValueError("a sampled rate needs at least one sample of at least 1 ms")
        self.samples = samples
        self.window_ms = window_ms
        self._values = [0.0]
        self._starts = [now_ms]
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` at ``now_ms`` (a negative value takes back an earlier one)."""
        current = self._current
        if now_ms - self._starts[current] >= self.window_ms:
            current = self._advance(now_ms)
        self._values[current] += value

    def _advance(self, now_ms: int) -> int:
        current = self._current = (self._current + 1) % self.samples
        if current == len(self._values):
            self._values.append(0.0)
            self._starts.append(now_ms)
        else:
            self._values[current] = 0.0
            self._starts[current] = now_ms
        return current

    def _purge(self, now_ms: int) -> None:
        """Samples older than the whole window count nothing; each restarts now."""
        expire_ms = self.samples * self.window_ms
        starts = self._starts
        for i, start in enumerate(starts):
            if now_ms - start >= expire_ms:
                self._values[i] = 0.0
                starts[i] = now_ms

    def span_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        elapsed = now_ms - min(self._starts)
        short = self.samples - 1 - elapsed // self.window_ms
        if short > 0:
            elapsed += short * self.window_ms
        return elapsed if elapsed > 0 else self.window_ms

    def measure(self, now_ms: int) -> float:
        """Per second, at ``now_ms``."""
        span_ms = self.span_ms(now_ms)
        return sum(self._values) * 1000.0 / span_ms
