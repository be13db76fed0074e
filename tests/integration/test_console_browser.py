"""``odradek console`` as a person uses it: headless Chromium (Debian's, through its
chromedriver and Selenium) against real broker processes.  The placement map shows leaders and
followers where the metadata puts them; a SIGKILLed broker's replicas turn offline and its
leaderships move within the page's refresh, and its ISRs come back after a restart; a group's
lag falls as its consumer catches up; the message browser shows records, escaped; the console
logs in to a SASL_SSL cluster with --command-config and reads a real Apache Kafka 3.9.

Screenshots go to a directory under the test's temporary directory (the placement map before and
after a broker's death and after its return, the message browser, a group's lag, the security page)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from odradek.local.cluster import ADMIN_PROPERTIES, LocalCluster
from odradek.local.console_process import ConsoleProcess
from odradek.local.security import ADMIN, CLIENT_USER
from odradek.local.zookeeper import EmbeddedZooKeeper
from odradek.perf.harness import create_topic_admin
from odradek.perf.kafka_ref import KafkaRefCluster
from support import ClusterFactory, create_topic, produce, run_odradek, unique_chroot, wait_until

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
PAGE_TIMEOUT_S = 60.0  # a killed broker's session expires after 6 s; leaders move after that


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    factory = ClusterFactory(zookeeper, tmp_path_factory.mktemp("console-cluster"))
    try:
        yield factory(3, racks=["r1", "r2", "r3"], metrics=True)
    finally:
        factory.stop_all()


@pytest.fixture(scope="module")
def console(cluster: LocalCluster) -> Iterator[ConsoleProcess]:
    process = ConsoleProcess.for_cluster(cluster)
    process.start()
    try:
        yield process
    finally:
        process.stop()


def headless_chromium() -> webdriver.Chrome:
    """Debian's Chromium driven by its chromedriver (both installed by scripts/bootstrap --test)."""
    assert CHROMIUM is not None and CHROMEDRIVER is not None, (
        "chromium and chromedriver not found: sh scripts/bootstrap --test installs Debian's chromium and chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver = headless_chromium()
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("console-screenshots")


# The placement map's rows of one topic, read in one script run: atomic with the page's reloads.
_READ_MAP = """
return Array.from(document.querySelectorAll('tr[data-topic="' + arguments[0] + '"]')).map(row => [
  Number(row.dataset.partition), Number(row.dataset.leader),
  Array.from(row.querySelectorAll("td[data-state]")).map(
    cell => [Number(cell.dataset.broker), cell.dataset.state, cell.dataset.preferred === "true"])]);
"""


@dataclass(frozen=True)
class MapView:
    states: dict[tuple[int, int], str]  # (partition, broker) -> leader / follower / out-of-isr / offline
    leaders: dict[int, int]
    preferred: dict[int, list[int]]


def read_map(driver: webdriver.Chrome, topic: str) -> MapView:
    rows = driver.execute_script(_READ_MAP, topic)
    return MapView({(p, b): state for p, _, cells in rows for b, state, _ in cells},
                   {p: leader for p, leader, _ in rows},
                   {p: [b for b, _, first in cells if first] for p, _, cells in rows})


def text_of(driver: webdriver.Chrome, element_id: str) -> str:
    """The text of an element of a live page, read in one script run (a reload cannot intervene)."""
    return driver.execute_script("const e = document.getElementById(arguments[0]); return e ? e.textContent : '';",
                                 element_id)


def page_wait(condition, message: str, timeout: float = PAGE_TIMEOUT_S):  # type: ignore[no-untyped-def]
    """Await a DOM condition the page's own refresh brings about (polled; no fixed sleep)."""
    return wait_until(condition, timeout=timeout, interval=0.2, message=message)


def test_placement_map_follows_a_broker_death_and_return(cluster: LocalCluster, console: ConsoleProcess,
                                                         browser: webdriver.Chrome, shots: Path) -> None:
    create_topic(cluster, "placed", assignment=[[0, 1, 2], [1, 2, 0], [2, 0, 1]])
    browser.get(console.url + "placement?topic=placed")
    expected = {(p, b): "leader" if b == p else "follower" for p in range(3) for b in range(3)}
    page_wait(lambda: read_map(browser, "placed").states == expected, "leaders on the first replicas, followers in sync")
    assert read_map(browser, "placed").preferred == {0: [0], 1: [1], 2: [2]}
    racks = browser.find_element(By.CSS_SELECTOR, 'th[data-broker="1"]').text
    assert "rack r2" in racks
    browser.save_screenshot(str(shots / "placement-before.png"))

    cluster.kill_broker(1)
    def failed_over() -> MapView | None:
        view = read_map(browser, "placed")
        moved = all(view.states.get((p, 1)) == "offline" for p in range(3)) and view.leaders.get(1) in (0, 2)
        return view if moved else None

    after = page_wait(failed_over, "broker 1's replicas offline, partition 1 led elsewhere")
    assert "down" in (browser.find_element(By.CSS_SELECTOR, 'th[data-broker="1"]').get_attribute("class") or "")
    assert after.states[(1, after.leaders[1])] == "leader"
    assert after.states[(0, 0)] == "leader" and after.states[(2, 2)] == "leader"  # untouched leaders stay
    browser.save_screenshot(str(shots / "placement-after.png"))
    # The cluster page names the under-replicated partitions meanwhile.
    browser.get(console.url + "cluster")
    page_wait(lambda: "placed" in text_of(browser, "under-replicated"), "under-replicated listed")

    cluster.start_broker(1)
    browser.get(console.url + "placement?topic=placed")
    page_wait(lambda: all(read_map(browser, "placed").states.get((p, 1)) in ("leader", "follower")
                          for p in range(3)),
              "broker 1 back in every ISR")
    browser.save_screenshot(str(shots / "placement-restored.png"))


def test_topic_page_and_message_browser(cluster: LocalCluster, console: ConsoleProcess,
                                        browser: webdriver.Chrome, shots: Path) -> None:
    create_topic(cluster, "browsed", partitions=2)
    produce(cluster.bootstrap_servers, "browsed", [(0, f"k{i}".encode(), f"<b>v{i}</b>".encode()) for i in range(30)],
            headers=[("origin", b"<script>x</script>")])
    browser.get(console.url + "topics/browsed")
    page_wait(lambda: "30" in [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr td")],
              "partition 0's end offset")
    assert "retention.ms" in browser.find_element(By.ID, "configs").text
    float(browser.find_element(By.ID, "rate").text)  # a number: the console reads the brokers' metrics
    browser.get(console.url + "topics/browsed/messages?partition=0&count=5&read_committed=1")
    rows = browser.find_elements(By.CSS_SELECTOR, "#records tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == ["25", "26", "27", "28", "29"]
    # Values and headers are shown as text, never as markup.
    assert rows[-1].find_elements(By.TAG_NAME, "td")[3].text == "<b>v29</b>"
    assert "<script>x</script>" in rows[-1].find_elements(By.TAG_NAME, "td")[4].text
    assert not browser.find_elements(By.CSS_SELECTOR, "#records b")
    browser.save_screenshot(str(shots / "messages.png"))


def test_group_lag_falls_as_the_consumer_catches_up(cluster: LocalCluster, console: ConsoleProcess,
                                                   browser: webdriver.Chrome, shots: Path) -> None:
    create_topic(cluster, "lagged", partitions=2)
    produce(cluster.bootstrap_servers, "lagged", [(i % 2, None, b"x") for i in range(200)])
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "slow-readers",
                         "client.id": "reader-1", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["lagged"])
        read = 0
        while not consumer.assignment() or read == 0:
            message = consumer.poll(1.0)
            read += message is not None and not message.error()
        # 20 of each partition's 100 records done: a lag of 160, whichever the consumer fetched first.
        consumer.commit(offsets=[TopicPartition("lagged", p, 20) for p in (0, 1)], asynchronous=False)
        browser.get(console.url + "groups/slow-readers")
        page_wait(lambda: text_of(browser, "total-lag") == "160", "a lag of 160")
        assert text_of(browser, "state") == "Stable"
        assert "reader-1" in text_of(browser, "members")
        while read < 200:
            message = consumer.poll(1.0)
            if message is not None and not message.error():
                read += 1
                if read % 50 == 0:
                    consumer.commit(asynchronous=False)  # the last at 200: every record done
        page_wait(lambda: text_of(browser, "total-lag") == "0", "no lag")
        # The history shows the fall: each partition's sparkline goes from 80 down to 0.
        lines = browser.find_elements(By.CSS_SELECTOR, "#lag svg.spark polyline")
        assert len(lines) == 2
        for line in lines:
            heights = [float(point.split(",")[1]) for point in (line.get_attribute("points") or "").split()]
            assert min(heights) < max(heights) and heights[-1] == max(heights)  # SVG's y grows downwards
        browser.save_screenshot(str(shots / "group-lag.png"))
    finally:
        consumer.close()
    browser.get(console.url + "groups")
    assert "slow-readers" in browser.find_element(By.ID, "groups").text


def test_console_logs_in_to_a_sasl_ssl_cluster(zookeeper: EmbeddedZooKeeper, tmp_path: Path) -> None:
    factory = ClusterFactory(zookeeper, tmp_path)
    try:
        secure = factory(1, security="sasl_ssl")
        config = secure.dir / ADMIN_PROPERTIES
        created = run_odradek("topics", "--bootstrap-server", secure.bootstrap_servers, "--command-config",
                              str(config), "--create", "--topic", "guarded", "--partitions", "2",
                              "--replication-factor", "1")
        assert created.returncode == 0, created.stderr
        granted = run_odradek("acls", "--bootstrap-server", secure.bootstrap_servers, "--command-config",
                              str(config), "--add", "--allow-principal", "User:reader", "--operation", "Read",
                              "--topic", "guarded")
        assert granted.returncode == 0, granted.stderr
        process = ConsoleProcess.for_cluster(secure)
        process.start()
        driver = headless_chromium()
        try:
            driver.get(process.url + "placement?topic=guarded")
            page_wait(lambda: read_map(driver, "guarded").states == {(0, 0): "leader", (1, 0): "leader"}, "guarded led")
            driver.get(process.url + "security")
            acls = driver.find_element(By.ID, "acls").text
            assert "User:reader" in acls and "guarded" in acls and "READ" in acls
            users = driver.find_element(By.ID, "scram-users").text
            assert ADMIN in users and CLIENT_USER in users and "SCRAM-SHA-512" in users
            driver.save_screenshot(str(tmp_path / "security.png"))
        finally:
            driver.quit()
            process.stop()
    finally:
        factory.stop_all()


def test_console_reads_apache_kafka(zookeeper: EmbeddedZooKeeper, tmp_path: Path,
                                    browser: webdriver.Chrome) -> None:
    kafka = KafkaRefCluster(tmp_path / "kafka", 1, version="3.9",
                            zookeeper_connect=unique_chroot(zookeeper, "console-kafka"))
    with kafka:
        create_topic_admin(kafka.bootstrap_servers, "reference", 2, 1)
        produce(kafka.bootstrap_servers, "reference", [(1, b"k", b"from kafka")])
        process = ConsoleProcess(kafka.bootstrap_servers, log_path=tmp_path / "console.log")
        process.start()
        try:
            browser.get(process.url + "placement?topic=reference")
            page_wait(lambda: read_map(browser, "reference").states == {(0, 0): "leader", (1, 0): "leader"},
                      "Kafka's leaders on the map")
            browser.get(process.url + "topics")
            assert "reference" in browser.find_element(By.ID, "topics").text
            browser.get(process.url + "topics/reference")
            assert "1" in [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#partitions tbody tr td")]
            browser.get(process.url + "topics/reference/messages?partition=1&count=5")
            assert "from kafka" in browser.find_element(By.ID, "records").text
        finally:
            process.stop()

