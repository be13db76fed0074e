"""librdkafka's own regression tests against a running odradek cluster.

The tests run through ``librdkafka-suite`` (``/work/shared/tools/librdkafka-suite``, or
``LIBRDKAFKA_SUITE``): it clones librdkafka at its tag (v2.15.0) from ``RDK_SRC`` (a git
repository or bare mirror), builds it once into ``~/.cache/rdk``, runs one test number at a
time with librdkafka's ``test-runner`` and prints one line per number, which becomes one case.

A full run takes every broker test of 0000-0150 that is neither local-only, sockem nor a
known issue (``selected``: the script's own choice, except that a test known to fail only on
Windows, ``TEST_F_KNOWN_ISSUE_WIN32``, runs: 0055 and 0069, which the script's pattern drops),
split into ``SHARDS`` script calls at once (but ``ALONE``, run after them); beside them, the tests the script leaves out go
straight to test-runner (``run_direct``): the socket-emulator tests (the script always passes
``-E``) and librdkafka's known issues (``-k``; 0028 and 0047 fail against Apache Kafka 2.8.2 too,
``KNOWN_ISSUES``).  librdkafka's CI runs them on a trivup cluster,
and the tests expect what trivup gives them; so does this runner:

* the cluster (``BROKER_OVERRIDES``, ``racks``): auto-created topics with 4 partitions and
  3 replicas, an ACL authorizer that allows everything without ACLs (0081, 0109, 0115 and
  0119 add and describe ACLs), ``broker.rack=RACK<id>`` with the rack-aware replica selector
  (0101 fetches from a follower);
* a Kafka distribution at ``KAFKA_PATH`` with ``ZK_ADDRESS``: tests call
  ``bin/kafka-topics.sh --zookeeper`` (TEST_KAFKA_VERSION 2.8), ``bin/kafka-acls.sh`` and
  ``bin/kafka-run-class.sh`` (0098 and 0113 run librdkafka's Java helpers).  Here it is
  Kafka 2.8's own jars (``jvm/kafka-2.8``, fetched by ``sh scripts/bootstrap --test``) behind
  Kafka's script names;
* the ``noautocreate`` scenario (0107, 0111) needs a cluster without auto-created topics:
  ``run(..., scenario="noautocreate")`` runs those two.

Secured runs (an ``odradek up --security sasl_ssl`` cluster with ``SECURED_BROKER_OVERRIDES``)
take the cluster's client settings (cluster.json's ``client``, librdkafka's names) as
``RDK_EXTRA_CONF`` and run the security tests: 0097 (certificate verification; its ``SSL_*``
files, which trivup would write, are made here from the client's key and the cluster's CA),
0135 (SASL credentials) and 0142 (KIP-368 re-authentication) without their share-consumer
sub-tests (KIP-932 share groups came with Kafka 4.2; they are reported as skipped).

Every run uses librdkafka CI's timeout multiplier (3).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from compat.context import SuiteContext
from compat.suite import CaseResult, Status, SuiteResult, Variant, one_line
from odradek.local.cluster import LocalCluster

__all__ = [
    "ALONE",
    "BROKER_OVERRIDES",
    "NOAUTOCREATE_TESTS",
    "QUICK_TESTS",
    "SECURED_BROKER_OVERRIDES",
    "SECURED_RUNS",
    "TAG",
    "balance",
    "build",
    "direct_tests",
    "fetch_crate",
    "kafka_distribution",
    "parse_suite_output",
    "racks",
    "rdk_work",
    "run",
    "run_direct",
    "run_tests",
    "selected",
    "shard_work",
    "source",
    "source_from_crate",
]

TAG = "v2.15.0"  # from the librdkafka mirror (RDK_SRC)
# Without a mirror (CI): the newest rdkafka-sys on crates.io, which bundles librdkafka 2.12.1.
RDKAFKA_SYS = "4.10.0+2.12.1"
REPO = Path(__file__).resolve().parents[2]
# v2.15.0's 0135 and 0142 also test share consumers (KIP-932, Kafka 4.2), with no version gate;
# their other sub-tests run alone, picked with test-runner's SUBTESTS (a substring of
# "function:line: name"), one script call each: (test, SUBTESTS or None).
SECURED_RUNS = (("0097", None), ("0135", "do_test:"), ("0142", "do_test_producer:"), ("0142", "do_test_consumer:"),
                ("0142", "do_test_txn_producer:"), ("0142", "do_test_reauth_failure:"))
SHARE_GROUP_SUBTESTS = ("0135 [do_test_share_consumer:]", "0142 [do_test_share_consumer:]",
                        "0142 [do_test_share_oauthbearer:]", "0142 [do_test_share_reauth_failure:]")
NOAUTOCREATE_TESTS = ("0107", "0111")
# Twenty broker tests of at most 3 s each here, none needing a Kafka tool: produce (acks,
# batches, sizes, headers), consume (offsets, seeks, batches), metadata, ApiVersions, commits.
QUICK_TESTS = (
    "0001", "0002", "0003", "0005", "0007", "0008", "0012", "0013", "0021", "0022",
    "0031", "0034", "0035", "0036", "0039", "0044", "0054", "0063", "0073", "0099",
)
# trivup's broker settings for librdkafka's default scenario (tests/scenarios/default.json and
# KafkaBrokerApp: SimpleAclAuthorizer; cluster_testing.py: racks and the replica selector).
BROKER_OVERRIDES = {
    "auto.create.topics.enable": "true",
    "num.partitions": "4",
    "default.replication.factor": "3",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
}
# The secured row's cluster: odradek up --security sasl_ssl, plus a re-authentication interval
# (0142 skips itself on brokers without connections.max.reauth.ms; librdkafka's CI uses 10 s).
SECURED_BROKER_OVERRIDES = {"connections.max.reauth.ms": "10000"}
# test-runner bounds each test itself; the script's outer bound must not cut 0113 (~11 min here).
TEST_TIMEOUT_S = 1200
# librdkafka's CI runs its tests with timeouts tripled (test.c: CI in the environment adds 2 to
# the multiplier); so do we, on a small shared machine where a Kafka tool's JVM alone takes
# seconds (0119 runs kafka-acls.sh twice within a 20 s budget).
TIMEOUT_MULTIPLIER = 3
# A full run splits the script's selection over this many script calls at once, each with a
# copy of the built tree (the script keeps its test.conf and logs there).  librdkafka's own CI
# runs five tests at a time against one cluster (test.c's test_concurrent_max), so the tests
# are written for it; test.c adds concurrency/3 to the timeout multiplier, and so do we.
SHARDS = 3
# Seconds a test took in a full run here (9e90846, one at a time), to balance the shards; a
# test not named is taken to be short.
MEASURED_S = {"0113": 659, "0081": 485, "0098": 199, "0150": 162, "0077": 153, "0089": 106, "0045": 101,
              "0103": 91, "0139": 87, "0033": 72, "0137": 68, "0091": 68, "0026": 63, "0102": 53, "0018": 51,
              "0052": 49, "0030": 49, "0109": 45, "0122": 44, "0093": 32, "0050": 29}
SHORT_S = 10
# Tests a full run keeps apart, after the others.  0045 (subscribe_many_updates) creates and
# deletes a hundred topics: odradek's controller takes 5.9 s to delete them (Kafka 2.8.2: 3.9 s,
# side by side here), and a topic created meanwhile waits behind them, long enough for the fixed
# short waits of the tests beside it to expire (0050's 5 s for a new topic, 0081's 1.5 s
# DeleteTopics timeout): seen in both of two concurrent runs, never one at a time.
ALONE = ("0045",)
# librdkafka's known issues (TEST_F_KNOWN_ISSUE) and what they do against Apache Kafka 2.8.2 itself:
# its test-runner run the same way (-k) against a kafka_ref cluster of one broker, 2026-11-27.
KNOWN_ISSUES = {
    "0028": "librdkafka's known issue 529: a 255-byte topic name; Kafka 2.8.2 refuses it the same way "
            "('Topic name is illegal, it can't be longer than 249 characters')",
    "0047": "librdkafka's known issue (partial buffer timeouts): it waits for a request to time out while "
            "the broker keeps up, and fills the client's queue; the same 'Local: Queue full' against Kafka 2.8.2",
}
DEFAULT_SCRIPT = Path("/work/shared/tools/librdkafka-suite")
DEFAULT_SRC = Path("/work/.mirror/confluentinc+librdkafka/repo")
_LINE = re.compile(r"^(\d{4}) (PASSED|FAILED|TIMEOUT|SKIPPED)\s+(\d+)s  ?(.*)$")


def racks(broker_ids: Iterable[int]) -> list[str]:
    """``broker.rack`` per broker, as trivup names them (0101 derives a rack from a broker id)."""
    return [f"RACK{b}" for b in broker_ids]


NAME = "librdkafka"
ORDER = 8
TITLE = "librdkafka's regression tests (broker tests 0000-0150; 0097/0135/0142 on SASL_SSL)"
_RACKS = tuple(racks(range(3)))  # the runner's three brokers, ids 0-2
VARIANTS = (Variant(racks=_RACKS),
            Variant("noautocreate", quick=False, overrides={"auto.create.topics.enable": "false"}, racks=_RACKS),
            Variant("sasl_ssl", security="sasl_ssl", quick=False, overrides=SECURED_BROKER_OVERRIDES, racks=_RACKS))


def parse_suite_output(lines: Iterable[str], logs: Path | None = None) -> list[CaseResult]:
    """Cases from librdkafka-suite's per-test lines (``NNNN WORD  SECSs  first failure line``);
    other lines (the build, the summary) are ignored.  A timeout is a failure."""
    cases = []
    for line in lines:
        m = _LINE.match(line.rstrip("\n"))
        if m is None:
            continue
        number, word, secs, detail = m.groups()
        outcome = {"PASSED": Status.PASSED, "SKIPPED": Status.SKIPPED}.get(word, Status.FAILED)
        cause = ""
        if outcome is Status.FAILED:
            reason = detail.strip() or (_failure_reason(logs / f"{number}.log") if logs is not None else "")
            cause = (f"timed out: {reason}" if word == "TIMEOUT" else reason).strip() or word.lower()
            if logs is not None:
                cause += f" (log: {logs / (number + '.log')})"
        elif outcome is Status.SKIPPED and logs is not None:
            cause = _skip_reason(logs / f"{number}.log")
        cases.append(CaseResult(number, outcome, one_line(cause), float(secs)))
    return cases


def _log_lines(log: Path) -> list[str]:
    """A test's log (read as soon as it ran: the next run of its number overwrites it),
    without colours."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return []
    return [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in text.splitlines()]


def _skip_reason(log: Path) -> str:
    """The test's own words for skipping (``SKIPPING`` lines of test-runner), those of a test
    that skipped itself before those of an entry filtered out by flags (0055's local mock)."""
    lines = [line[:300] for line in _log_lines(log) if "SKIP" in line and "|" not in line]
    return next((line for line in lines if "negative test flags" not in line), lines[0] if lines else "")


def _failure_reason(log: Path) -> str:
    """What test-runner printed under the first ``### Test "..." failed at ...: ###`` header."""
    lines = _log_lines(log)
    for i, line in enumerate(lines[:-1]):
        if line.startswith("### Test ") and " failed at " in line:
            return lines[i + 1][:300]
    return ""


def extra_conf(secured: Mapping[str, str] | None) -> str:
    """``RDK_EXTRA_CONF``: the client settings as test.conf lines."""
    return "".join(f"{k}={v}\n" for k, v in (secured or {}).items())


def script_runs(secured: Mapping[str, str] | None, quick: bool, scenario: str = "default"
                ) -> list[tuple[tuple[str, ...], str | None]]:
    """The script calls of a run: (test numbers, SUBTESTS or None); no numbers means the
    script's own selection (every broker test)."""
    if scenario == "noautocreate":
        return [(NOAUTOCREATE_TESTS, None)]
    if secured:
        return [((number,), subtests) for number, subtests in SECURED_RUNS]
    return [(QUICK_TESTS if quick else (), None)]


def prepare() -> None:
    """Build librdkafka and its test-runner from the sources ``run`` will use (once; cached in
    ``RDK_WORK``), before a cluster starts for nothing."""
    build()


def rdk_work() -> Path:
    """Where librdkafka-suite builds and keeps its logs: ``RDK_WORK``, else ``~/.cache/rdk``."""
    return Path(os.environ.get("RDK_WORK", Path.home() / ".cache" / "rdk"))


def build() -> tuple[Path, Path, str]:
    """The script, librdkafka's sources and their tag, with the test-runner built in
    ``RDK_WORK`` (the script builds on its first call; the one test it is given, against a
    closed port, is cut at once)."""
    script = suite_script()
    work = rdk_work()
    src, tag = source(work)
    tree = work / f"librdkafka-{tag}"
    if not (tree / "tests" / "test-runner").exists():
        subprocess.run([str(script), str(src), "127.0.0.1:9", "0000"],
                       env=dict(os.environ, RDK_TAG=tag, RDK_WORK=str(work), RDK_TIMEOUT="1"),
                       capture_output=True, check=False)
    if not (tree / "tests" / "test-runner").exists():
        raise RuntimeError(f"librdkafka {tag} did not build from {src}; see {work}/*.log")
    return script, src, tag


def run(cluster: LocalCluster, ctx: SuiteContext, quick: bool) -> SuiteResult:
    """The matrix's entry: the variant's tests against ``cluster`` as the admin user."""
    secured = cluster.security.librdkafka_properties() if cluster.security is not None else None
    scenario = "noautocreate" if ctx.variant.name == "noautocreate" else "default"
    return run_tests(cluster.bootstrap_servers, secured=secured, quick=quick, workdir=ctx.workdir,
                     zookeeper=cluster.zookeeper_connect, scenario=scenario)


def suite_script() -> Path:
    """``librdkafka-suite``: ``LIBRDKAFKA_SUITE``, else shared/tools beside the repository (as
    CI lays it out), else the workplace's."""
    if named := os.environ.get("LIBRDKAFKA_SUITE"):
        return Path(named)
    for candidate in (REPO.parent / "shared" / "tools" / "librdkafka-suite", DEFAULT_SCRIPT):
        if candidate.exists():
            return candidate
    raise FileNotFoundError("librdkafka-suite not found beside the repository (../shared/tools) nor at "
                            f"{DEFAULT_SCRIPT}; set LIBRDKAFKA_SUITE")


def source(work: Path) -> tuple[Path, str]:
    """librdkafka's sources and their tag: ``RDK_SRC`` (a repository, or a ``.crate`` file, or
    ``crates.io`` for rdkafka-sys from the registry), else the librdkafka mirror when there is
    one, else rdkafka-sys from crates.io (CI has no mirror)."""
    named = os.environ.get("RDK_SRC")
    if named == "crates.io" or (named is None and not DEFAULT_SRC.exists()):
        return source_from_crate(fetch_crate(), work / "crates")
    src = Path(named) if named else DEFAULT_SRC
    if src.suffix == ".crate":
        return source_from_crate(src, work / "crates")
    return src, TAG


def fetch_crate(cache: Path | None = None) -> Path:
    """``rdkafka-sys-RDKAFKA_SYS.crate``, downloaded once by ``cargo fetch`` of a scratch package
    that depends on it, into a cargo home under ``~/.cache/odradek/cargo``."""
    cache = cache or Path(os.environ.get("ODRADEK_CARGO_CACHE", Path.home() / ".cache" / "odradek" / "cargo"))
    home = cache / "home"
    found = sorted(home.glob(f"registry/cache/*/rdkafka-sys-{RDKAFKA_SYS}.crate"))
    if found:
        return found[0]
    scratch = cache / "fetch"
    (scratch / "src").mkdir(parents=True, exist_ok=True)
    (scratch / "src" / "lib.rs").write_text("")
    (scratch / "Cargo.toml").write_text(
        '[package]\nname = "odradek-librdkafka-source"\nversion = "0.0.0"\nedition = "2021"\n\n'
        f'[dependencies]\nrdkafka-sys = {{ version = "={RDKAFKA_SYS}", default-features = false }}\n')
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    subprocess.run([cargo, "fetch", "--quiet"], cwd=scratch, env=dict(os.environ, CARGO_HOME=str(home)),
                   check=True, timeout=900)
    [crate] = home.glob(f"registry/cache/*/rdkafka-sys-{RDKAFKA_SYS}.crate")
    return crate


def run_tests(bootstrap: str, *, secured: dict[str, str] | None, quick: bool, workdir: Path,
              zookeeper: str | None = None, scenario: str = "default", tests: Iterable[str] = (),
              shards: int = SHARDS) -> SuiteResult:
    """Run librdkafka's tests against ``bootstrap`` (IPv4 literals; a cluster set up as the
    module docstring says, ``zookeeper`` its connect string); one case per test number.
    ``tests`` names the numbers to run instead of the variant's selection; a full run goes
    over ``shards`` script calls at once.  The script's output is kept in
    ``workdir/librdkafka-suite*.log``."""
    script, src, tag = build()
    work = rdk_work()
    workdir.mkdir(parents=True, exist_ok=True)
    tree = work / f"librdkafka-{tag}"
    runs = [(tuple(tests), None)] if tests else script_runs(secured, quick, scenario)
    full = runs == [((), None)]
    alone: list[tuple[tuple[str, ...], None]] = []
    if full:
        numbers = selected((tree / "tests" / "test.c").read_text(errors="replace"))
        runs = [(tuple(shard), None) for shard in balance([n for n in numbers if n not in ALONE], shards)]
        alone = [((n,), None) for n in numbers if n in ALONE]
    concurrency = len(runs) if full else 1
    conf = {"test.timeout.multiplier": f"{TIMEOUT_MULTIPLIER + concurrency / 3:g}" if concurrency > 1
            else str(TIMEOUT_MULTIPLIER), **(secured or {})}
    env = dict(os.environ, RDK_TAG=tag, RDK_WORK=str(work), TEST_SCENARIO=scenario,
               RDK_TIMEOUT=os.environ.get("RDK_TIMEOUT", str(TEST_TIMEOUT_S)))
    kafka_path = kafka_distribution(workdir / "kafka")
    env["KAFKA_PATH"] = str(kafka_path)
    if zookeeper:
        env["ZK_ADDRESS"] = zookeeper
    if conf.get("security.protocol", "").upper() in ("SSL", "SASL_SSL"):
        ssl_env, ssl_conf = ssl_test_files(conf, workdir / "ssl")
        env.update(ssl_env)
        conf.update(ssl_conf)
    env["RDK_EXTRA_CONF"] = extra_conf(conf)
    build_java_helpers(tree / "tests" / "java", kafka_path)
    result = SuiteResult(versions={"librdkafka": tag.removeprefix("v")})
    direct = None
    if full:
        # The tests the script leaves out (sockem, known issues) go straight to test-runner,
        # beside the shards, on a tree copy of their own.
        test_c = (tree / "tests" / "test.c").read_text(errors="replace")
        pool = ThreadPoolExecutor(1)
        direct = pool.submit(run_direct, shard_work(work, tag, len(runs)) / f"librdkafka-{tag}", bootstrap, env,
                             direct_tests(test_c))
        pool.shutdown(wait=False)  # the run goes on; its result is awaited below
    for start in range(0, len(runs), concurrency):
        batch = list(enumerate(runs))[start:start + concurrency]
        calls = []
        for i, (numbers, subtests) in batch:
            # Concurrent calls each have a copy of the built tree; one at a time share RDK_WORK.
            call_work = shard_work(work, tag, i) if concurrency > 1 else work
            log = workdir / ("librdkafka-suite.log" if i == 0 else f"librdkafka-suite-{i}.log")
            call_env = dict(env, RDK_WORK=str(call_work), **({"SUBTESTS": subtests} if subtests else {}))
            with log.open("w") as out:
                # The script exits 1 when a test failed; its lines say which.
                calls.append((subprocess.Popen([str(script), str(src), bootstrap, *numbers], env=call_env,
                                               stdout=out, stderr=subprocess.STDOUT), log, call_work, subtests))
        for process, log, call_work, subtests in calls:
            process.wait()
            with log.open() as lines:
                found = parse_suite_output(lines, call_work / "logs")
            result.cases += [replace(c, name=f"{c.name} [{subtests}]") if subtests else c for c in found]
    if direct is not None:
        result.cases += direct.result()
    for numbers, _ in alone:  # after everything else, one at a time
        log = workdir / f"librdkafka-suite-alone-{numbers[0]}.log"
        with log.open("w") as out:
            subprocess.run([str(script), str(src), bootstrap, *numbers], env=env, stdout=out,
                           stderr=subprocess.STDOUT, check=False)
        with log.open() as lines:
            result.cases += parse_suite_output(lines, work / "logs")
    if secured and not tests:
        result.cases += [CaseResult(name, Status.SKIPPED, "share groups (KIP-932, Kafka 4.2+): not in Kafka 2.8")
                         for name in SHARE_GROUP_SUBTESTS]
    return result


def run_direct(tree: Path, bootstrap: str, env: Mapping[str, str], tests: Iterable[tuple[str, tuple[str, ...]]]
               ) -> list[CaseResult]:
    """Run each (number, test-runner flags) of ``tests`` with ``tree``'s test-runner as the script
    would (one number at a time, its log in ``tree/../logs``), for the tests the script's fixed
    ``-E`` or test-runner's default leaves out; one case per number.  A known issue that fails
    says so, with what it does against Apache Kafka (``KNOWN_ISSUES``)."""
    tests_dir = tree / "tests"
    logs = tree.parent / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (tests_dir / "test.conf").write_text(f"bootstrap.servers={bootstrap}\n{env.get('RDK_EXTRA_CONF', '')}")
    run_env = dict(env, LD_LIBRARY_PATH="../src:../src-cpp", TEST_KAFKA_VERSION=env.get("TEST_KAFKA_VERSION", "2.8.0"))
    lines = []
    for number, flags in tests:
        started = time.monotonic()
        with (logs / f"{number}.log").open("w") as out:
            try:
                code = subprocess.run(["./test-runner", *flags, "-L", "-p1"], cwd=tests_dir, stdout=out,
                                      stderr=subprocess.STDOUT, env=dict(run_env, TESTS=number),
                                      timeout=TEST_TIMEOUT_S).returncode
            except subprocess.TimeoutExpired:
                code = None
        states = {line.split("|")[2].strip() for line in _log_lines(logs / f"{number}.log")
                  if re.match(rf"^\| *{number}", line) and line.count("|") > 2}
        word = ("TIMEOUT" if code is None else "FAILED" if code != 0 or "FAILED" in states or not states
                else "PASSED" if "PASSED" in states else "SKIPPED")
        lines.append(f"{number} {word} {round(time.monotonic() - started):>6}s  ")
    cases = parse_suite_output(lines, logs)
    return [replace(c, cause=f"{c.cause}; {KNOWN_ISSUES[c.name]}") if c.status is Status.FAILED
            and c.name in KNOWN_ISSUES else c for c in cases]


def balance(numbers: Iterable[str], shards: int) -> list[list[str]]:
    """``numbers`` over at most ``shards`` lists of about equal time (``MEASURED_S``), the
    longest first onto the least loaded; each list in test order."""
    loads: list[tuple[float, list[str]]] = [(0.0, []) for _ in range(max(1, shards))]
    for number in sorted(numbers, key=lambda n: (-MEASURED_S.get(n, SHORT_S), n)):
        i = min(range(len(loads)), key=lambda k: loads[k][0])
        load, members = loads[i]
        loads[i] = (load + MEASURED_S.get(number, SHORT_S), [*members, number])
    return [sorted(members) for _, members in loads if members]


def shard_work(work: Path, tag: str, i: int) -> Path:
    """``RDK_WORK`` for concurrent script call ``i``: a copy of the built tree (made once) in
    ``work/shard<i>``, where that call's test.conf and logs go."""
    directory = work / f"shard{i}"
    tree = directory / f"librdkafka-{tag}"
    if not (tree / "tests" / "test-runner").exists():
        shutil.rmtree(tree, ignore_errors=True)
        directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(work / f"librdkafka-{tag}"), str(tree)], check=True)
    return directory


_TABLE_ENTRY = re.compile(r"_TEST\((\d{4})_\w+,(.*?)\)\s*,\s*$", re.S | re.M)
_NOT_RUN = {"TEST_F_LOCAL", "TEST_F_SOCKEM", "TEST_F_KNOWN_ISSUE"}


def _table_flags(test_c: str) -> dict[str, list[set[str]]]:
    """Each test number of 0000-0150 in test.c's table, with the flags of each of its entries."""
    flags: dict[str, list[set[str]]] = {}
    for m in _TABLE_ENTRY.finditer(test_c):
        number, rest = m.group(1), m.group(2).split("_TEST(")[0]
        if int(number) <= 150:
            flags.setdefault(number, []).append(set(re.findall(r"TEST_F_[A-Z_0-9]+", rest)))
    return flags


def selected(test_c: str) -> list[str]:
    """The script's own selection: numbers with an entry that is not local-only, sockem nor a
    known issue."""
    return sorted(n for n, entries in _table_flags(test_c).items() if any(not e & _NOT_RUN for e in entries))


def direct_tests(test_c: str) -> list[tuple[str, tuple[str, ...]]]:
    """The broker tests of 0000-0150 that the script's own selection leaves out, with the
    test-runner flags that run them: socket-emulator tests (the script always passes ``-E``)
    with none, known issues with ``-k``.  Local-only tests (no broker) are not among them, and
    a number with a broker test the script runs is not either."""
    tests = []
    for number, entries in sorted(_table_flags(test_c).items()):
        if any(not entry & _NOT_RUN for entry in entries):
            continue  # the script runs it
        broker = [entry for entry in entries if "TEST_F_LOCAL" not in entry]
        if any("TEST_F_KNOWN_ISSUE" in entry for entry in broker):
            tests.append((number, ("-k",)))
        elif broker:
            tests.append((number, ()))
    return tests


def source_from_crate(crate: Path, directory: Path) -> tuple[Path, str]:
    """librdkafka's sources from crates.io's ``rdkafka-sys`` crate (``rdkafka-sys-X+V.crate``
    bundles librdkafka V with its tests/) as the git repository the script clones, tagged
    ``vV``: where ``RDK_SRC`` names a downloaded crate (CI, without a librdkafka mirror)."""
    import tarfile

    version = crate.name.removesuffix(".crate").rpartition("+")[2]
    tag = f"v{version}"
    repo = directory / f"librdkafka-{version}"
    if (repo / ".git").is_dir():
        return repo, tag
    directory.mkdir(parents=True, exist_ok=True)
    staging = directory / f".{repo.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(crate) as archive:
        archive.extractall(staging, filter="data")
    [top] = staging.iterdir()
    git = ["git", "-C", str(top / "librdkafka"), "-c", "user.name=odradek", "-c", "user.email=odradek@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", crate.name], ["tag", tag]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    (top / "librdkafka").rename(repo)
    shutil.rmtree(staging)
    return repo, tag


# Kafka's bin/ scripts as the tests call them: kafka-run-class.sh honours CLASSPATH (the Java
# helpers' run-class.sh sets it) and logs only warnings, as tools-log4j.properties does.  The
# tools live seconds and some tests give them only a few: a small heap, the serial collector
# and the quick compiler start them fastest.
_RUN_CLASS = """#!/bin/sh
base=$(cd "$(dirname "$0")/.." && pwd)
exec java -Xmx256M -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \\
  -Dlog4j.configuration="file:$base/config/tools-log4j.properties" \\
  -cp "${CLASSPATH:+$CLASSPATH:}$base/libs/*" "$@"
"""
_TOOLS = {"kafka-topics.sh": "kafka.admin.TopicCommand", "kafka-configs.sh": "kafka.admin.ConfigCommand",
          "kafka-acls.sh": "kafka.admin.AclCommand"}
_TOOLS_LOG4J = ("log4j.rootLogger=WARN, stderr\n"
                "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
                "log4j.appender.stderr.Target=System.err\n")


def kafka_distribution(directory: Path) -> Path:
    """A Kafka 2.8 installation as the tests expect at ``KAFKA_PATH``: ``libs/`` (links to
    jvm/kafka-2.8's jars), ``bin/kafka-run-class.sh`` and the tools the tests run."""
    from odradek.perf.kafka_ref import jvm_classpath

    libs = directory / "libs"
    libs.mkdir(parents=True, exist_ok=True)
    for jar in jvm_classpath("kafka-2.8"):
        link = libs / jar.name
        if not link.exists():
            link.symlink_to(jar)
    (directory / "config").mkdir(exist_ok=True)
    (directory / "config" / "tools-log4j.properties").write_text(_TOOLS_LOG4J)
    bin_dir = directory / "bin"
    bin_dir.mkdir(exist_ok=True)
    scripts = {"kafka-run-class.sh": _RUN_CLASS}
    scripts.update({name: f'#!/bin/sh\nexec "$(dirname "$0")/kafka-run-class.sh" {main} "$@"\n'
                    for name, main in _TOOLS.items()})
    for name, text in scripts.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(0o755)
    return directory


def build_java_helpers(java_dir: Path, kafka_path: Path) -> None:
    """Compile librdkafka's Java test helpers (tests/java) against Kafka's client jar once."""
    if java_dir.is_dir() and not (java_dir / "TransactionProducerCli.class").exists():
        subprocess.run(["make", "-C", str(java_dir), f"KAFKA_PATH={kafka_path}"], capture_output=True, check=True)


def ssl_test_files(secured: Mapping[str, str], directory: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The ``SSL_*`` variables test 0097 reads (trivup writes them for its clusters) and the
    client settings that go with them: the client's key (password-protected, as trivup's) and
    certificate as PEM, DER and PKCS#12 (with the CA), the CA as PEM and DER.  A cluster
    without client certificates (SASL_SSL) gets a self-signed one: its brokers ask for none,
    so every connection succeeds, as 0097 expects of a SASL_SSL listener."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    directory.mkdir(parents=True, exist_ok=True)
    ca = x509.load_pem_x509_certificate(Path(secured["ssl.ca.location"]).read_bytes())
    if "ssl.key.location" in secured:
        key = serialization.load_pem_private_key(Path(secured["ssl.key.location"]).read_bytes(), None)
        cert = x509.load_pem_x509_certificate(Path(secured["ssl.certificate.location"]).read_bytes())
    else:
        key, cert = _self_signed("odradek-compat-client")
    password = "odradek-compat"
    encrypted = serialization.BestAvailableEncryption(password.encode())
    pem, der, pkcs8 = serialization.Encoding.PEM, serialization.Encoding.DER, serialization.PrivateFormat.PKCS8
    files = {
        "SSL_pub_pem": cert.public_bytes(pem),
        "SSL_pub_der": cert.public_bytes(der),
        "SSL_priv_pem": key.private_bytes(pem, pkcs8, encrypted),
        "SSL_priv_der": key.private_bytes(der, pkcs8, serialization.NoEncryption()),
        "SSL_ca_pem": ca.public_bytes(pem),
        "SSL_all_cas_pem": ca.public_bytes(pem),
        "SSL_ca_der": ca.public_bytes(der),
        "SSL_pkcs": pkcs12.serialize_key_and_certificates(b"client", key, cert, [ca], encrypted),  # type: ignore[arg-type]
    }
    env = {"SSL_password": password}
    for name, data in files.items():
        path = directory / name.removeprefix("SSL_").replace("_", ".")
        path.write_bytes(data)
        env[name] = str(path)
    conf = {"ssl.key.location": env["SSL_priv_pem"], "ssl.certificate.location": env["SSL_pub_pem"],
            "ssl.key.password": password}
    return env, conf


def _self_signed(cn: str):  # type: ignore[no-untyped-def]
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=2)).sign(key, hashes.SHA256()))
    return key, cert
