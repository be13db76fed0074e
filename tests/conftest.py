"""Shared fixtures: one embedded ZooKeeper per test run, a fresh chroot per cluster, brokers
as real processes in temporary directories.  Every fixture stops what it starts.

Every test that starts ZooKeeper, brokers or Spark is marked ``slow`` here, so that
``pytest -m "not slow"`` is a unit-level run of a minute or less."""

from __future__ import annotations

import collections
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from odradek.local.cluster import LocalCluster
from odradek.local.zookeeper import EmbeddedZooKeeper
from support import ClusterFactory, unique_chroot
from support.examples import QUICK_SHARE, use_quick_budget

TESTS = Path(__file__).parent

# Property tests check what comes out, not how fast: on a loaded machine (CI, or the helpers'
# runs beside the suite) an example of a few milliseconds can take hundreds, and Hypothesis's
# default 200 ms deadline then fails a correct test.  Speed is the benchmarks' business.
settings.register_profile("odradek", deadline=None)
settings.load_profile("odradek")

# End-to-end by design: their tests start clusters, `odradek` processes, Spark or a lab, some
# without a fixture (LocalCluster, EmbeddedZooKeeper or a subprocess in the test itself).
END_TO_END_DIRECTORIES = frozenset({"integration", "compat", "fault", "spark", "lab", "differential"})

# Fixtures that start ZooKeeper, brokers or Spark; a test using one, directly or through another
# fixture, is slow wherever it lives (a unit test of the ACL store on a real ZooKeeper, say).
CLUSTER_FIXTURES = frozenset({"zookeeper", "zk_connect", "cluster_factory", "module_cluster",
                              "odradek_broker", "tansu_broker", "spark"})


# Runs beside odradek that the README's test command leaves out (pyproject's addopts:
# -m "not ecosystem"; `pytest -m ecosystem` runs them): Kafka's JVM tools side by side with
# odradek's (a JVM per case: 232 s together on a quiet machine, which the command's time
# budget does not hold beside the matrix's quick subset).  A test may also carry the mark
# itself (the whole cluster's Kafka <-> odradek migration).
ECOSYSTEM_MODULES = frozenset({
    "integration/test_consumer_groups_cli.py", "integration/test_partition_admin_tools.py",
    "integration/test_kafka_tools.py",
})


# The README's test command runs the suite on three pytest-xdist workers (pyproject's addopts:
# -n 3 --dist loadfile): much of it waits (on elections, session timeouts, retention), so three
# workers keep two cores busy (17 min against 22 with two).  Each module goes whole to one
# worker, so that its fixtures (its cluster, say) are set up once; a directory in
# SHARED_DIRECTORIES goes whole to one worker, its modules one after another: Spark's session
# (one JVM per worker would not fit beside the brokers; and the modules that start driver
# programs of their own, a standalone cluster or three brokers of their own, tried as units
# of their own, made the suite slower, 29.6 min against 27: Spark's JVMs side by side on two
# cores) and the labs (their namespaces, subnets and nftables tables stay apart).
SHARED_DIRECTORIES = frozenset({"spark", "lab"})

# Work goes to the workers in collection order as they free up, so the longest units start
# first (the spark and lab directories, the matrix's quick subset: one module of minutes) and
# the many short unit tests fill the end; the rest after these.
WORK_ORDER = ("spark", "lab", "compat/test_matrix_quick.py", "fault", "integration", "compat", "differential")


def _work_rank(where: Path) -> int:
    path = where.as_posix()
    return next((i for i, prefix in enumerate(WORK_ORDER) if path == prefix or path.startswith(prefix + "/")),
                len(WORK_ORDER))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """--dist loadfile, with each SHARED_DIRECTORIES directory one unit of work."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

    return ModuleScheduling(config, log)


def _work_unit(nodeid: str) -> str:
    """What goes whole to one worker: the test's module, or its SHARED_DIRECTORIES directory."""
    module = nodeid.split("::", 1)[0]
    parts = module.split("/")
    return parts[1] if parts[0] == "tests" and len(parts) > 2 and parts[1] in SHARED_DIRECTORIES else module


# Seconds spent in each unit of work (setup, call and teardown of its tests), for the summary:
# the longest units bound the parallel run's wall time.
_unit_seconds: collections.Counter[str] = collections.Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _unit_seconds[_work_unit(report.nodeid)] += report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if len(_unit_seconds) > 1:
        terminalreporter.write_sep("=", f"longest units of work (of {len(_unit_seconds)})")
        for unit, seconds in _unit_seconds.most_common(10):
            terminalreporter.write_line(f"{seconds:8.1f}s {unit}")


def _quick_loop(config: pytest.Config) -> bool:
    return " ".join(config.option.markexpr.split()) == "not slow"


def pytest_configure(config: pytest.Config) -> None:
    """Under ``-m "not slow"`` property tests draw a share of their examples (support/examples.py);
    the whole suite draws them all."""
    if _quick_loop(config):
        use_quick_budget()
        settings.register_profile("odradek-quick", parent=settings.get_profile("odradek"),
                                  max_examples=max(10, settings.default.max_examples // QUICK_SHARE))
        settings.load_profile("odradek-quick")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m "not slow"`` leave the end-to-end directories out: every test there would be
    deselected, after its module had imported clients, Spark and the like for nothing."""
    if collection_path.parent == TESTS and collection_path.name in END_TO_END_DIRECTORIES and _quick_loop(config):
        return True
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--oracle-full", action="store_true",
                     help="tests/differential: compare every version both sides advertise, not only the highest")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.relative_to(TESTS)
        if where.parts[0] in END_TO_END_DIRECTORIES or CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if where.as_posix() in ECOSYSTEM_MODULES:
            item.add_marker(pytest.mark.ecosystem)
    items.sort(key=lambda item: _work_rank(item.path.relative_to(TESTS)))  # stable: modules stay whole


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    zk = EmbeddedZooKeeper(tmp_path_factory.mktemp("zookeeper"))
    zk.start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def zk_connect(zookeeper: EmbeddedZooKeeper) -> str:
    """A connect string with a chroot no other test uses."""
    return unique_chroot(zookeeper, "t")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test's report ends with its brokers' last log lines: on CI the temporary
    directories are gone when the report is read."""
    outcome = yield
    report = outcome.get_result()
    factory = getattr(item, "funcargs", {}).get("cluster_factory")
    if report.when == "call" and report.failed and isinstance(factory, ClusterFactory):
        report.sections.append(("brokers' last log lines", factory.log_tails()))


@pytest.fixture
def cluster_factory(zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> Iterator[ClusterFactory]:
    factory = ClusterFactory(zookeeper, tmp_path)
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture(scope="module")
def module_cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A 3-broker cluster shared by the tests of one module (tests must not break it)."""
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("module-cluster"))
    try:
        yield factory(3)
    finally:
        factory.stop_all()
