"""The compatibility matrix's frame without a cluster: the Java program's result lines, the
tools' output readers, RESULTS.md written and read back, suite discovery."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat import java_build, report, suites
from compat.suite import CaseResult, MissingApi, Skip, Status, SuiteResult, Variant, missing_api
from compat.suites import java_clients, kafka_tools
from compat.tool_output import api_versions, table, topic_description, unsupported_api


def test_java_program_lines_become_cases() -> None:
    stdout = "\n".join([
        "some log line",
        "VERSION\tkafka-clients\t3.9.2",
        "PLAN\tadmin.a,admin.b,admin.c,admin.d",
        "CASE\tadmin.a\tPASS\t1.50\t",
        "CASE\tadmin.b\tFAIL\t0.20\tpartitions: expected 3, got 2",
        "CASE\tadmin.c\tMISSING\t0.01\tElectLeaders: UnsupportedVersionException: no ELECT_LEADERS",
    ])
    result = java_clients.parse(stdout, ended="exit 137")
    assert result.versions == {"kafka-clients": "3.9.2"}
    assert [(c.name, c.status) for c in result.cases] == [
        ("admin.a", Status.PASSED), ("admin.b", Status.FAILED), ("admin.c", Status.FAILED), ("admin.d", Status.FAILED)]
    assert result.cases[1].cause == "partitions: expected 3, got 2"
    assert result.cases[2].cause == ("odradek lacks the ElectLeaders API: UnsupportedVersionException: "
                                     "no ELECT_LEADERS")
    assert result.cases[3].cause == "no result: the program ended (exit 137)"
    assert result.cases[0].seconds == 1.5


def test_a_missing_api_is_named_by_its_evidence() -> None:
    assert missing_api("AlterClientQuotas", "UnsupportedVersionException: The node does not support "
                       "DESCRIBE_CLIENT_QUOTAS") == ("odradek lacks the DescribeClientQuotas API: UnsupportedVersion"
                                                      "Exception: The node does not support DESCRIBE_CLIENT_QUOTAS")
    assert missing_api("ElectLeaders", "timed out").startswith("odradek lacks the ElectLeaders API")


def test_a_program_that_printed_no_plan_fails_the_suite() -> None:
    (case,) = java_clients.parse("Error: could not find main class\n", ended="exit 1").cases
    assert case.status is Status.FAILED and "exit 1" in case.cause


def test_python_cases_record_their_outcome() -> None:
    result = SuiteResult()

    def missing() -> None:
        raise MissingApi("DescribeLogDirs", "UnsupportedVersionException: ...")

    def broken() -> None:
        raise KeyError("x")

    def skipped() -> None:
        raise Skip("needs docker")

    def failing() -> None:
        raise AssertionError("expected 1\ngot 2")

    for name, body in (("ok", lambda: None), ("missing", missing), ("broken", broken), ("skip", skipped),
                       ("fail", failing)):
        result.case(name, body)
    assert [(c.status, c.cause) for c in result.cases] == [
        (Status.PASSED, ""),
        (Status.FAILED, "odradek lacks the DescribeLogDirs API: UnsupportedVersionException: ..."),
        (Status.FAILED, "KeyError: 'x'"),
        (Status.SKIPPED, "needs docker"),
        (Status.FAILED, "expected 1 got 2"),
    ]
    assert (result.count(Status.PASSED), result.count(Status.FAILED), result.count(Status.SKIPPED)) == (1, 3, 1)


def row(suite: str, variant: Variant, *cases: CaseResult, seconds: float = 75.0) -> report.Row:
    return report.Row.of(suite, variant, SuiteResult(list(cases), {"kafka-clients": "3.9.2"}), seconds,
                         quick=False, finished="2025-01-01 10:00 UTC", commit="abc1234")


def test_results_md_keeps_the_rows_of_suites_not_run_again() -> None:
    plain, secured = Variant(), Variant("sasl_ssl", security="sasl_ssl")
    first = [row("java-clients", plain, CaseResult("a", Status.PASSED), CaseResult("b", Status.FAILED, "x | y")),
             row("java-clients", secured, CaseResult("a", Status.PASSED)),
             row("kafka-tools", plain, CaseResult("t", Status.SKIPPED, "why"))]
    order = {"java-clients": 1, "kafka-tools": 2}
    text = report.render(report.merge([], first, order), {"java-clients": "Java clients"})
    assert "| java-clients | Java clients | PLAINTEXT | 1 | 1 | 0 | 1m 15s | kafka-clients 3.9.2 |" in text
    assert "- `b` failed: x | y" in text and "- `t` skipped: why" in text
    again = [row("kafka-tools", plain, CaseResult("t", Status.PASSED), seconds=5)]
    merged = report.merge(report.read_rows(text), again, order)
    assert [(r.suite, r.listener, r.passed, r.failed, r.skipped) for r in merged] == [
        ("java-clients", "PLAINTEXT", 1, 1, 0), ("java-clients", "SASL_SSL", 1, 0, 0), ("kafka-tools", "PLAINTEXT", 1, 0, 0)]
    # Rows read back keep their failures' causes (not their passed cases).
    assert [(c.name, c.cause) for c in merged[0].cases] == [("b", "x | y")]
    assert "`t` skipped" not in report.render(merged, {})


def test_a_variant_named_apart_from_its_listener_says_so() -> None:
    noauto = Variant("noautocreate", overrides={"auto.create.topics.enable": "false"})
    text = report.render([row("librdkafka", noauto, CaseResult("0107", Status.FAILED, "x"))], {})
    assert "| librdkafka |  | PLAINTEXT (noautocreate) | 0 | 1 | 0 |" in text
    assert "### librdkafka (PLAINTEXT (noautocreate))" in text
    assert "| SASL_SSL |" in report.render([row("s", Variant("sasl_ssl", security="sasl_ssl"))], {})


def test_results_json_has_every_case(tmp_path: Path) -> None:
    path = report.write_json([row("java-clients", Variant(), CaseResult("a", Status.PASSED))], tmp_path / "r.json")
    (back,) = [report.Row.from_json(d) for d in json.loads(path.read_text())]
    assert [c.name for c in back.cases] == ["a"]


def test_tables_descriptions_and_api_versions() -> None:
    groups = ("\nGROUP   TOPIC  PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID  HOST  CLIENT-ID\n"
              "g       t      0          3               10              7    -            -     -\n"
              "g       t      1          -               10              -    -            -     -\n\n")
    assert [(r["PARTITION"], r["CURRENT-OFFSET"], r["LAG"]) for r in table(groups, "GROUP")] == [
        ("0", "3", "7"), ("1", "-", "-")]
    assert table(groups, "TOPIC") == []
    described = ("Topic: t\tTopicId: AAAAAAAAAAAAAAAAAAAAAA\tPartitionCount: 2\tReplicationFactor: 3\t"
                 "Configs: min.insync.replicas=2,cleanup.policy=compact\n"
                 "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2,0\tIsr: 1,2,0\tElr: \tLastKnownElr: \n"
                 "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,0,1\tIsr: 2,0\tElr: \tLastKnownElr: \n")
    summary, partitions = topic_description(described, "t")
    assert summary["Configs"] == "min.insync.replicas=2,cleanup.policy=compact"
    assert [(p["Partition"], p["Isr"]) for p in partitions] == [("0", "1,2,0"), ("1", "2,0")]
    assert topic_description(described, "other") == ({}, [])
    versions = ("127.0.0.1:9092 (id: 0 rack: null) -> (\n\tProduce(0): 3 to 9 [usable: 9],\n"
                "\tElectLeaders(43): UNSUPPORTED,\n)\n127.0.0.1:9093 (id: 1 rack: r1) -> (\n"
                "\tFetch(1): 4 to 12 [usable: 12],\n\tLeaderAndIsr(4): 5 [usable: 5]\n)\n")
    assert api_versions(versions) == {0: {"Produce": (0, 3, 9), "ElectLeaders": None},
                                      1: {"Fetch": (1, 4, 12), "LeaderAndIsr": (4, 5, 5)}}
    assert unsupported_api("Error\norg.apache.kafka.common.errors.UnsupportedVersionException: no\n") == (
        "org.apache.kafka.common.errors.UnsupportedVersionException: no")
    assert unsupported_api("all fine") is None


def test_suites_are_found_in_order_and_by_name() -> None:
    names = [s.NAME for s in suites.all_suites()]
    assert names[:2] == ["java-clients", "kafka-tools"]
    assert {"franz-go", "librdkafka"} <= set(names)
    assert [s.NAME for s in suites.find(["kafka-tools"])] == ["kafka-tools"]
    with pytest.raises(ValueError, match="no suite nope"):
        suites.find(["nope"])


def test_tool_cases_selected_for_quick_and_secured_runs() -> None:
    quick = [c.name for c in kafka_tools.selected(kafka_tools.CASES, quick=True, secured=False)]
    assert quick == ["kafka-topics", "kafka-consumer-groups", "kafka-dump-log"]
    secured = kafka_tools.selected(kafka_tools.CASES, quick=False, secured=True)
    assert secured and all(c.secured for c in secured)
    assert len(kafka_tools.selected(kafka_tools.CASES, quick=False, secured=False)) == len(kafka_tools.CASES)


def test_the_java_build_follows_its_sources(tmp_path: Path) -> None:
    (tmp_path / "src" / "main").mkdir(parents=True)
    (tmp_path / "pom.xml").write_text("<project/>")
    source = tmp_path / "src" / "main" / "A.java"
    source.write_text("class A {}")
    before = java_build.source_digest(tmp_path)
    assert java_build.source_digest(tmp_path) == before
    source.write_text("class A { }")
    assert java_build.source_digest(tmp_path) != before


def test_prepare_runs_only_the_named_suites_builds_and_refuses_an_unknown_one(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from compat.__main__ import main
    from compat.suites import franz_go, librdkafka

    prepared: list[str] = []
    monkeypatch.setattr(franz_go, "prepare", lambda: prepared.append(franz_go.NAME))
    monkeypatch.setattr(librdkafka, "prepare", lambda: prepared.append(librdkafka.NAME))
    assert main(["prepare", "librdkafka", "franz-go"]) == 0
    assert prepared == ["librdkafka", "franz-go"]
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == ["librdkafka", "franz-go"]
    with pytest.raises(SystemExit) as refused:
        main(["prepare", "no-such-suite"])
    assert refused.value.code == 2 and prepared == ["librdkafka", "franz-go"]
    assert "no suite no-such-suite" in capsys.readouterr().err


def test_a_run_writes_each_row_as_it_finishes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A matrix run stopped half-way keeps the rows it finished (RESULTS.md and the JSON)."""
    import compat.__main__ as cli
    from compat.suites import streams

    monkeypatch.setattr(cli, "RESULTS_MD", tmp_path / "RESULTS.md")
    monkeypatch.setattr(cli, "RESULTS_DIR", tmp_path / "results")
    seen: list[str] = []

    def run_variant(suite: object, variant: Variant, workdir: Path, **_: object) -> report.Row:
        if seen:  # the second row never finishes
            raise KeyboardInterrupt
        seen.append(variant.name)
        return report.Row(java_clients.NAME, variant.name, variant.listener, 3, 0, 0, 1.0, {}, "now", "abc")

    monkeypatch.setattr(cli, "run_variant", run_variant)
    with pytest.raises(KeyboardInterrupt):
        cli.main(["run", java_clients.NAME, streams.NAME])
    rows = report.read_rows((tmp_path / "RESULTS.md").read_text())
    assert [(r.suite, r.variant, r.passed) for r in rows] == [(java_clients.NAME, "plaintext", 3)]
    [written] = (tmp_path / "results").glob("run-*.json")
    assert json.loads(written.read_text())
