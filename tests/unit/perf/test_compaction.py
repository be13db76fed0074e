"""perf/compaction.py: the cleaner's summary as Kafka's log4j writes it (several lines) and
as odradek writes it (one), the last one of a log, and none of another log."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.perf.common import PerfError
from odradek.perf.compaction import CleanerSummary, cleaner_summary, latency_stats, wait_cleaned

# Kafka 3.9's LogCleaner.recordStats through "[%d] %p %m (%c)%n".
KAFKA = """[2026-11-26 21:00:00,000] INFO Starting the log cleaner (kafka.log.LogCleaner)
[2026-11-26 21:00:09,999] INFO [kafka-log-cleaner-thread-0]:
\tLog cleaner thread 0 cleaned log compacted-0 (dirty section = [0, 8264462])
\t1,000.1 MB of log processed in 9.9 seconds (101.0 MB/sec).
\tIndexed 1,000.1 MB in 4.9 seconds (204.1 Mb/sec, 49.5% of total time)
\tBuffer utilization: 1.5%
 (kafka.log.LogCleaner)
"""

ODRADEK = ("[2026-11-26 21:00:09,999] INFO Log cleaner thread 0 cleaned log compacted-0 (dirty section = [0, 826]): "
           "1,048.7 MB of log processed in 12.5 seconds (83.9 MB/sec); indexed 1,048.7 MB in 5.0 seconds, "
           "buffer utilization 1.5%; start size 1,048.7 MB (826 messages), end size 1.2 MB (10 messages)\n"
           "[2026-11-26 21:00:19,999] INFO Log cleaner thread 0 cleaned log compacted-0 (dirty section = [826, 900]): "
           "2.0 MB of log processed in 0.1 seconds (20.0 MB/sec); indexed ...\n")


def test_kafka_s_summary_spans_lines() -> None:
    summary = cleaner_summary(KAFKA, "compacted-0")
    assert summary is not None
    assert (summary.mb, summary.seconds, summary.mb_per_s) == (1000.1, 9.9, 101.0)
    assert summary.line.startswith("cleaned log compacted-0 (dirty section = [0, 8264462]) 1,000.1 MB")


def test_odradek_s_summary_is_one_line_and_the_last_cleaning_counts() -> None:
    assert cleaner_summary(ODRADEK, "compacted-0") == CleanerSummary(
        2.0, 0.1, 20.0, "cleaned log compacted-0 (dirty section = [826, 900]): 2.0 MB of log processed in 0.1 seconds "
        "(20.0 MB/sec)")


def test_another_log_s_summary_is_not_taken() -> None:
    assert cleaner_summary(KAFKA, "compacted-1") is None
    assert cleaner_summary(ODRADEK.replace("compacted-0", "compacted-10"), "compacted-1") is None


def test_waiting_for_a_cleaning_reads_the_log_file(tmp_path: Path) -> None:
    log = tmp_path / "log-cleaner.log"
    log.write_text(KAFKA)
    assert wait_cleaned(log, "compacted-0", timeout_s=1).seconds == 9.9
    with pytest.raises(PerfError, match="not cleaned"):
        wait_cleaned(tmp_path / "missing.log", "compacted-0", timeout_s=0.3)


def test_latency_stats_of_samples() -> None:
    samples = [(i, float(i)) for i in range(1, 101)]
    assert latency_stats(samples) == {"count": 100, "p50_ms": 51.0, "p99_ms": 100.0, "max_ms": 100.0}
    assert latency_stats([])["count"] == 0
