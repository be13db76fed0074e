"""The franz-go and librdkafka runners of the compatibility matrix without a cluster: their
readers of the suites' own output, and the settings they derive from a cluster's client
settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compat.suites import franz_go, librdkafka


def _event(action: str, test: str | None = None, output: str | None = None, elapsed: float | None = None) -> str:
    event: dict[str, object] = {"Action": action, "Package": franz_go.PACKAGE}
    if test is not None:
        event["Test"] = test
    if output is not None:
        event["Output"] = output
    if elapsed is not None:
        event["Elapsed"] = elapsed
    return json.dumps(event) + "\n"


def test_test2json_events_become_one_case_per_top_level_test() -> None:
    stream = [
        _event("start"),
        _event("run", "TestPing"),
        _event("output", "TestPing", "=== RUN   TestPing\n"),
        _event("pass", "TestPing", elapsed=0.25),
        _event("run", "TestGroupETL"),
        _event("run", "TestGroupETL/sub"),
        _event("output", "TestGroupETL/sub", "    group_test.go:120: saw double offset t 3 p 1\n"),
        _event("output", "TestGroupETL/sub", "        while consuming\n"),
        _event("fail", "TestGroupETL/sub", elapsed=1.0),
        _event("fail", "TestGroupETL", elapsed=2.5),
        _event("run", "TestShareGroup"),
        _event("output", "TestShareGroup", "    client_test.go:399: broker does not support share groups\n"),
        _event("output", "TestShareGroup", "--- SKIP: TestShareGroup (0.00s)\n"),
        _event("skip", "TestShareGroup", elapsed=0.0),
        _event("fail", elapsed=10.0),
    ]
    cases = franz_go.parse_test2json(stream)
    assert [(c.name, c.status) for c in cases] == [
        ("TestPing", "passed"), ("TestGroupETL", "failed"), ("TestShareGroup", "skipped")]
    assert cases[0].seconds == 0.25 and cases[0].cause == ""
    assert cases[1].cause == "group_test.go:120: saw double offset t 3 p 1 while consuming"
    assert cases[2].cause == "client_test.go:399: broker does not support share groups"


def test_a_failure_is_explained_by_its_failed_subtest_not_a_skipped_one() -> None:
    stream = [
        _event("run", "TestTxnEtl"),
        _event("run", "TestTxnEtl/848"),
        _event("output", "TestTxnEtl/848", "    helpers_test.go:866: broker does not support KIP-848\n"),
        _event("skip", "TestTxnEtl/848", elapsed=0.0),
        _event("run", "TestTxnEtl/range"),
        _event("output", "TestTxnEtl/range", "    helpers_test.go:983: flush unexpected err: REQUEST_TIMED_OUT\n"),
        _event("fail", "TestTxnEtl/range", elapsed=287.0),
        _event("fail", "TestTxnEtl", elapsed=288.0),
    ]
    [case] = franz_go.parse_test2json(stream)
    assert case.status == "failed"
    assert case.cause == "helpers_test.go:983: flush unexpected err: REQUEST_TIMED_OUT"


def test_a_test_cut_off_by_the_binary_timeout_fails_with_the_panic() -> None:
    stream = [
        _event("run", "TestTxnEtl"),
        _event("output", "TestTxnEtl", "=== RUN   TestTxnEtl\n"),
        _event("output", None, "panic: test timed out after 40m0s\n"),
        _event("output", None, "\trunning tests:\n"),
        _event("fail", elapsed=2400.0),
    ]
    [case] = franz_go.parse_test2json(stream)
    assert case.status == "failed"
    assert case.cause == "did not finish: panic: test timed out after 40m0s"


def test_kgo_environment_per_security_protocol(tmp_path: Path) -> None:
    plain = franz_go.suite_environment("127.0.0.1:9092", None, quick=False)
    assert plain["KGO_SEEDS"] == "127.0.0.1:9092" and plain["KGO_TEST_RF"] == "3"
    assert plain["KGO_TEST_RECORDS"] == str(franz_go.RECORDS) and "KGO_TEST_TLS" not in plain

    ssl = franz_go.suite_environment("h:1", {"security.protocol": "SSL", "ssl.ca.location": "/s/ca.pem",
                                             "ssl.certificate.location": "/s/admin.crt",
                                             "ssl.key.location": "/s/admin.key"}, quick=True)
    assert ssl["KGO_TEST_TLS"] == "ca:/s/ca.pem,cert:/s/admin.crt,key:/s/admin.key"
    assert ssl["KGO_TEST_RECORDS"] == str(franz_go.QUICK_RECORDS)

    scram = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.username": "admin", "sasl.password": "pw"}
    env = franz_go.suite_environment("h:1,h:2", scram, quick=False)
    assert env["KGO_TEST_SCRAM"] == "admin:pw:512" and env["KGO_TEST_SCRAM_SEEDS"] == "h:1,h:2"
    assert franz_go.selected_tests(scram, quick=False) == franz_go.SCRAM_TESTS
    assert franz_go.selected_tests(None, quick=True) == franz_go.QUICK_TESTS
    assert franz_go.selected_tests(None, quick=False) is None

    with pytest.raises(ValueError, match="SASL_SSL"):
        franz_go.suite_environment("h:1", {"security.protocol": "SASL_SSL"}, quick=False)


def test_librdkafka_suite_lines_become_cases(tmp_path: Path) -> None:
    (tmp_path / "0097.log").write_text(
        "[0097_ssl_verify / 0.001s] \x1b[33mSKIPPING: Test requires SSL_* env-vars set up by trivup\x1b[0m\n"
        "|  0097_ssl_verify  |  SKIPPED  |\n")
    output = [
        "some build line\n",
        "0001 PASSED      12s  \n",
        "0030 FAILED      40s  [0030_offset_commit / 39.2s] TEST FAILURE ### Test \"0030\" failed at x.c:10\n",
        "0089 TIMEOUT    300s  \n",
        "0097 SKIPPED      1s  \n",
        "librdkafka-suite v2.15.0: 1 passed, 2 failed, 1 skipped (failed: 0030 0089)\n",
    ]
    (tmp_path / "0089.log").write_text(
        "[0089_max_poll_interval / 900s] TEST FAILURE\n"
        "### Test \"0089_max_poll_interval\" failed at testcpp.h:77:() at Fri Nov 27: ###\n"
        "Expected _SSL or _ALL_BROKERS_DOWN error codes, got: Local: Broker transport failure\n")
    cases = librdkafka.parse_suite_output(output, tmp_path)
    assert [(c.name, c.status, c.seconds) for c in cases] == [
        ("0001", "passed", 12.0), ("0030", "failed", 40.0), ("0089", "failed", 300.0), ("0097", "skipped", 1.0)]
    assert cases[1].cause.startswith("[0030_offset_commit / 39.2s] TEST FAILURE")
    assert cases[1].cause.endswith(f"(log: {tmp_path / '0030.log'})")
    assert cases[2].cause.startswith("timed out: Expected _SSL or _ALL_BROKERS_DOWN error codes, got: Local: Broker")
    assert cases[3].cause == "[0097_ssl_verify / 0.001s] SKIPPING: Test requires SSL_* env-vars set up by trivup"


def test_librdkafka_ssl_files_from_a_sasl_ssl_cluster(tmp_path: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key, pkcs12

    from odradek.security.certs import CertificateAuthority

    ca_file = CertificateAuthority.create("test-ca").write_truststore_pem(tmp_path / "ca.pem")
    secured = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(ca_file)}
    env, conf = librdkafka.ssl_test_files(secured, tmp_path / "ssl")
    password = env["SSL_password"].encode()
    key = load_pem_private_key(Path(conf["ssl.key.location"]).read_bytes(), password)
    cert = x509.load_pem_x509_certificate(Path(conf["ssl.certificate.location"]).read_bytes())
    assert cert.public_key().public_numbers() == key.public_key().public_numbers()
    _, _, cas = pkcs12.load_key_and_certificates(Path(env["SSL_pkcs"]).read_bytes(), password)
    assert [c.subject for c in cas] == [x509.load_pem_x509_certificate(ca_file.read_bytes()).subject]
    assert conf["ssl.key.password"] == env["SSL_password"]
    secured_runs = librdkafka.script_runs(secured, quick=True)
    assert secured_runs[0] == (("0097",), None) and (("0135",), "do_test:") in secured_runs
    assert all("share" not in (subtests or "") for _, subtests in secured_runs)
    assert librdkafka.script_runs(None, quick=True) == [(librdkafka.QUICK_TESTS, None)]
    assert librdkafka.script_runs(None, quick=False) == [((), None)]
    assert librdkafka.script_runs(None, quick=False, scenario="noautocreate") == [(librdkafka.NOAUTOCREATE_TESTS, None)]
    assert librdkafka.extra_conf({"a": "1", "b": "2"}) == "a=1\nb=2\n"


def test_librdkafka_sources_from_an_rdkafka_sys_crate(tmp_path: Path) -> None:
    import io
    import subprocess
    import tarfile

    crate = tmp_path / "rdkafka-sys-4.9.0+2.10.0.crate"
    with tarfile.open(crate, "w:gz") as archive:
        for name, text in (("Cargo.toml", b"[package]\n"), ("librdkafka/configure", b"#!/bin/sh\n"),
                           ("librdkafka/tests/test.c", b"/* tests */\n")):
            info = tarfile.TarInfo(f"rdkafka-sys-4.9.0+2.10.0/{name}")
            info.size = len(text)
            archive.addfile(info, io.BytesIO(text))
    repo, tag = librdkafka.source_from_crate(crate, tmp_path / "crates")
    assert tag == "v2.10.0" and repo == tmp_path / "crates" / "librdkafka-2.10.0"
    files = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", tag],
                           capture_output=True, text=True, check=True).stdout.split()
    assert files == ["configure", "tests/test.c"]
    assert librdkafka.source_from_crate(crate, tmp_path / "crates") == (repo, tag)  # once only


def test_librdkafka_tests_the_script_leaves_out_are_skipped_with_their_reason() -> None:
    test_c = """
    _TEST(0001_multiobj, 0),
    _TEST(0028_long_topicnames, TEST_F_KNOWN_ISSUE, TEST_BRKVER(0, 9, 0, 0), .extra = "https://x"),
    _TEST(0049_consume_conn_close, TEST_F_SOCKEM, TEST_BRKVER(0, 9, 0, 0)),
    _TEST(0055_producer_latency, TEST_F_KNOWN_ISSUE_WIN32),
    _TEST(0055_producer_latency_mock, TEST_F_LOCAL),
    _TEST(0076_produce_retry, TEST_F_SOCKEM),
    _TEST(0076_produce_retry_mock, TEST_F_LOCAL),
    _TEST(0079_fork, TEST_F_LOCAL | TEST_F_KNOWN_ISSUE, .extra = "fork"),
    _TEST(0080_admin_ut, TEST_F_LOCAL),
    _TEST(0101_fetch_from_follower, 0, TEST_BRKVER(2, 4, 0, 0)),
    _TEST(0151_late, TEST_F_SOCKEM),
    """
    # What the script leaves out runs straight with test-runner: sockem tests (the script's -E),
    # known issues with -k; local-only tests not at all.
    assert librdkafka.direct_tests(test_c) == [("0028", ("-k",)), ("0049", ()), ("0076", ())]
    assert librdkafka.selected(test_c) == ["0001", "0055", "0101"]  # a Windows-only known issue runs


def test_librdkafka_tests_the_script_leaves_out_run_straight_with_test_runner(tmp_path: Path) -> None:
    """run_direct as it drives librdkafka's test-runner: here a stand-in that prints test-runner's
    summary row for TESTS (passed, failed with its failure header, or killed by its timeout)."""
    tests = tmp_path / "shard3" / "librdkafka-v2.15.0" / "tests"
    tests.mkdir(parents=True)
    runner = tests / "test-runner"
    runner.write_text("#!/bin/sh\n"
                      'echo "$TESTS $*" >> ../args.log\n'
                      'case "$TESTS" in\n'
                      '0049) echo "| 0049_consume_conn_close | PASSED | 1.0s |" ;;\n'
                      '0028) echo \'### Test "0028_long_topicnames" failed at test.c:1: ###\'; '
                      'echo "Topic name is illegal"; echo "| 0028_long_topicnames | FAILED | 0.1s |"; exit 134 ;;\n'
                      "esac\n")
    runner.chmod(0o755)
    cases = librdkafka.run_direct(tests.parent, "127.0.0.1:9", {"RDK_EXTRA_CONF": "a=1\n"},
                                  [("0049", ()), ("0028", ("-k",))])
    assert [(c.name, c.status) for c in cases] == [("0049", "passed"), ("0028", "failed")]
    assert cases[1].cause.startswith("Topic name is illegal") and "Kafka 2.8.2" in cases[1].cause
    assert (tests.parent / "args.log").read_text() == "0049 -L -p1\n0028 -k -L -p1\n"
    assert (tests / "test.conf").read_text() == "bootstrap.servers=127.0.0.1:9\na=1\n"
    assert (tmp_path / "shard3" / "logs" / "0028.log").exists()


def test_a_full_librdkafka_run_is_split_into_shards_of_about_equal_time() -> None:
    numbers = [f"{n:04d}" for n in range(151)]
    shards = librdkafka.balance(numbers, 3)
    assert sorted(n for shard in shards for n in shard) == numbers and len(shards) == 3
    assert all(shard == sorted(shard) for shard in shards)
    loads = [sum(librdkafka.MEASURED_S.get(n, librdkafka.SHORT_S) for n in shard) for shard in shards]
    assert max(loads) - min(loads) <= max(librdkafka.MEASURED_S.values()) // 2, loads
    assert not {"0113", "0081"} <= set(next(s for s in shards if "0113" in s))  # the two longest apart
    assert librdkafka.balance(["0001", "0002"], 3) == [["0001"], ["0002"]]


def test_the_new_suites_run_their_rows_on_the_clusters_their_tests_expect() -> None:
    by_name = {v.name: v for v in librdkafka.VARIANTS}
    assert by_name["plaintext"].quick and by_name["plaintext"].racks == ("RACK0", "RACK1", "RACK2")
    assert by_name["noautocreate"].overrides == {"auto.create.topics.enable": "false"}
    assert by_name["sasl_ssl"].security == "sasl_ssl" and "connections.max.reauth.ms" in by_name["sasl_ssl"].overrides
    assert [v.security for v in franz_go.VARIANTS] == [None, "ssl", "sasl_plaintext"]
    assert [v.name for v in franz_go.VARIANTS if v.quick] == ["plaintext"]
