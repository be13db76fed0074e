"""franz-go's kgo integration tests against a running odradek cluster.

franz-go (github.com/twmb/franz-go) publishes its ``pkg/kgo`` tests as the suite other
Kafka-compatible brokers report on: they read the cluster from ``KGO_SEEDS`` and the
replication factor from ``KGO_TEST_RF``.  The module comes from the Go module proxy (its zip
carries the ``*_test.go`` files), is compiled once into a test binary cached under
``~/.cache/odradek/go`` (``ODRADEK_GO_CACHE``), and runs with ``-test.v=test2json`` so that
every top-level test becomes one case.

Secured runs take the cluster's client settings (cluster.json's ``client``, librdkafka's
names).  kgo's test client speaks TLS (``KGO_TEST_TLS``) but not SASL, and its two SCRAM tests
dial ``KGO_TEST_SCRAM_SEEDS`` without TLS, so:

* an ``SSL`` cluster runs the whole suite over mutual TLS (the admin user's certificate, a
  super-user of the cluster's ACL authorizer);
* a ``SASL_PLAINTEXT`` cluster runs the SCRAM tests only (``KGO_TEST_SCRAM=user:pass:512``);
* ``SASL_SSL`` has no kgo test that can reach it (ValueError).

Tests gated on APIs odradek does not advertise (KIP-848 consumer groups, share groups) skip
themselves and are reported as skipped with their own message.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MODULE", "PACKAGE", "QUICK_TESTS", "VERSION", "CaseResult", "parse_test2json", "run"]

MODULE = "github.com/twmb/franz-go"
PACKAGE = f"{MODULE}/pkg/kgo"
VERSION = "v1.22.3"  # the newest release on proxy.golang.org when this suite was written
RECORDS = 100_000  # KGO_TEST_RECORDS of the full run (franz-go's own default is 500000)
QUICK_RECORDS = 10_000
# The fastest dozen of kgo's tests that use the broker (at most ~3 s each here): ping, metadata,
# produce (large records), consume, group offsets, partition changes, purging.
QUICK_TESTS = (
    "TestPing", "TestIssue1034", "TestUnknownGroupOffsetFetchPinned", "TestConsumeTopicRetrieval",
    "TestConsumeTopicRetrieval_Many", "TestIssue523", "TestIssue648", "TestClient_ProduceLargeMessages",
    "TestAddRemovePartitions", "TestIssue325", "TestIssue810", "TestIssue769",
)
SCRAM_TESTS = ("TestSCRAMAuth", "TestSCRAMAuthBadCredentials")
# Tests that cannot run over KGO_TEST_TLS, with the reason (franz-go's, not the broker's).
TLS_EXCLUDED = {
    "TestIssue769": "suite bug under KGO_TEST_TLS: the test adds Dialer() to the TLS client options, "
                    "NewClient refuses the pair ('cannot set both Dialer and DialTLSConfig'), the test "
                    "ignores the error and produces on a nil client: the panic ends the whole binary",
}
# Go's own timeout for the whole binary; ours is a little longer so Go's report comes first.
FULL_TIMEOUT_S = 40 * 60
QUICK_TIMEOUT_S = 8 * 60


@dataclass(frozen=True)
class CaseResult:
    """One test's outcome: ``passed``, ``failed`` or ``skipped``, with a one-line cause."""

    name: str
    outcome: str
    seconds: float
    cause: str = ""


def cache_dir() -> Path:
    """Where Go's module cache, build cache and the compiled test binaries live."""
    return Path(os.environ.get("ODRADEK_GO_CACHE", Path.home() / ".cache" / "odradek" / "go"))


def go_environment(cache: Path) -> dict[str, str]:
    """The environment of every ``go`` command: caches outside the repository, modules
    resolved from the proxy (``-mod=mod``), no toolchain download."""
    env = dict(os.environ)
    env.update({"GOPATH": str(cache), "GOMODCACHE": str(cache / "mod"), "GOCACHE": str(cache / "build"),
                "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"})
    return env


def go_binary() -> str:
    found = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if found is None:
        raise FileNotFoundError("the franz-go suite needs Go (https://go.dev/dl/) on PATH")
    return found


def module_dir(version: str, env: Mapping[str, str]) -> Path:
    """The extracted module (``go mod download``), read-only in the module cache."""
    out = subprocess.run([go_binary(), "mod", "download", "-json", f"{MODULE}@{version}"], env=env,
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return Path(json.loads(out)["Dir"])


def test_binary(version: str, env: Mapping[str, str], cache: Path) -> Path:
    """``pkg/kgo``'s compiled tests, built once per version from a scratch module requiring it."""
    binary = cache / "bin" / f"kgo-{version}.test"
    if binary.exists():
        return binary
    scratch = cache / f"kgo-{version}"
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "go.mod").write_text(f"module odradek.compat/kgo\n\ngo 1.24\n\nrequire {MODULE} {version}\n")
    binary.parent.mkdir(parents=True, exist_ok=True)
    partial = binary.with_suffix(".partial")
    subprocess.run([go_binary(), "test", "-c", "-o", str(partial), PACKAGE], cwd=scratch, env=env,
                   check=True, timeout=3600)
    partial.rename(binary)
    return binary


def suite_environment(bootstrap: str, secured: Mapping[str, str] | None, quick: bool) -> dict[str, str]:
    """The ``KGO_*`` variables of one run (see the module docstring for the secured cases)."""
    env = {"KGO_SEEDS": bootstrap, "KGO_TEST_RF": "3",
           "KGO_TEST_RECORDS": str(QUICK_RECORDS if quick else RECORDS), "KGO_LOG_LEVEL": "none"}
    protocol = (secured or {}).get("security.protocol", "PLAINTEXT").upper()
    if protocol == "SSL":
        assert secured is not None
        env["KGO_TEST_TLS"] = ",".join(f"{k}:{secured[p]}" for k, p in (
            ("ca", "ssl.ca.location"), ("cert", "ssl.certificate.location"), ("key", "ssl.key.location"))
            if p in secured)
    elif protocol == "SASL_PLAINTEXT":
        assert secured is not None
        bits = "512" if secured.get("sasl.mechanism", "").upper() == "SCRAM-SHA-512" else "256"
        env["KGO_TEST_SCRAM"] = f"{secured['sasl.username']}:{secured['sasl.password']}:{bits}"
        env["KGO_TEST_SCRAM_SEEDS"] = bootstrap
    elif protocol != "PLAINTEXT":
        raise ValueError(f"kgo's tests cannot reach a {protocol} cluster: its test client has TLS but no SASL, "
                         "its SCRAM tests SASL but no TLS; run them on ssl and sasl_plaintext clusters")
    return env


def selected_tests(secured: Mapping[str, str] | None, quick: bool) -> tuple[str, ...] | None:
    """The tests to run by name, or None for all of them."""
    if (secured or {}).get("security.protocol", "").upper() == "SASL_PLAINTEXT":
        return SCRAM_TESTS
    return QUICK_TESTS if quick else None


def run(bootstrap: str, *, secured: dict[str, str] | None, quick: bool, workdir: Path) -> list[CaseResult]:
    """Run kgo's tests against ``bootstrap``; one case per top-level test.  The test2json
    stream is kept in ``workdir/franz-go.jsonl``."""
    cache = cache_dir()
    env = go_environment(cache)
    binary = test_binary(VERSION, env, cache)
    package_dir = module_dir(VERSION, env) / "pkg" / "kgo"
    env.update(suite_environment(bootstrap, secured, quick))
    names = selected_tests(secured, quick)
    timeout_s = QUICK_TIMEOUT_S if quick else FULL_TIMEOUT_S
    args = [go_binary(), "tool", "test2json", "-t", "-p", PACKAGE, str(binary), "-test.v=test2json",
            "-test.count=1", "-test.parallel=2", f"-test.timeout={timeout_s}s"]
    if names is not None:
        args.append("-test.run=^(" + "|".join(names) + ")$")
    excluded = TLS_EXCLUDED if "KGO_TEST_TLS" in env else {}
    if excluded:
        args.append("-test.skip=^(" + "|".join(excluded) + ")$")
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "franz-go.jsonl"
    # test2json exits non-zero when a test fails; the stream says which.
    with log.open("w") as out:
        subprocess.run(args, cwd=package_dir, env=env, stdout=out, stderr=subprocess.STDOUT,
                       timeout=timeout_s + 120, check=False)
    with log.open() as lines:
        cases = parse_test2json(lines)
    return cases + [CaseResult(name, "skipped", 0.0, why) for name, why in excluded.items()
                    if names is None or name in names]


@dataclass
class _Test:
    output: list[str] = field(default_factory=list)
    outcome: str | None = None
    seconds: float = 0.0


def parse_test2json(lines: Iterable[str]) -> list[CaseResult]:
    """Cases from ``go test -json`` / test2json events, one per top-level test in the order they
    started.  A subtest's output counts toward its parent's cause; a test without a final
    event (the binary timed out or crashed) fails with the package's last words."""
    tests: dict[str, _Test] = {}
    package_output: list[str] = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            package_output.append(line.rstrip("\n"))  # a crash may print outside test2json
            continue
        name = event.get("Test")
        action = event.get("Action")
        if not name:
            if action == "output":
                package_output.append(event.get("Output", "").rstrip("\n"))
            continue
        top = name.split("/", 1)[0]
        test = tests.setdefault(top, _Test())
        if action == "output":
            test.output.append(event.get("Output", "").rstrip("\n"))
        elif action in ("pass", "fail", "skip") and name == top:
            test.outcome = {"pass": "passed", "fail": "failed", "skip": "skipped"}[action]
            test.seconds = float(event.get("Elapsed", 0.0))
    cases = []
    for name, test in tests.items():
        if test.outcome is None:
            cases.append(CaseResult(name, "failed", 0.0, "did not finish: " + _last_words(package_output)))
        else:
            cause = "" if test.outcome == "passed" else _cause(test.output)
            cases.append(CaseResult(name, test.outcome, test.seconds, cause))
    return cases


def _cause(output: list[str]) -> str:
    """The first message a test logged at its failure or skip (``file_test.go:NN: ...``),
    continuation lines joined, capped at 400 characters."""
    for i, line in enumerate(output):
        text = line.strip()
        head = text.split(":", 2)
        if len(head) == 3 and head[0].endswith("_test.go") and head[1].isdigit():
            more = [o.strip() for o in output[i + 1:i + 4] if o.startswith("        ")]
            return " ".join([text, *more])[:400]
    return _last_words(output)


def _last_words(output: list[str]) -> str:
    interesting = [o.strip() for o in output if o.strip() and not o.strip().startswith(("=== ", "--- "))]
    panics = [o for o in interesting if o.startswith("panic:")]
    return (panics[0] if panics else interesting[-1] if interesting else "no output")[:400]
