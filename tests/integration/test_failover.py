"""Broker and controller failures on a real cluster: leader elections, controller failover and
fencing, sessions that expire, and brokers that restart."""

from __future__ import annotations

import asyncio
import json
import re
import signal

import pytest

from odradek.local.cluster import LocalCluster
from odradek.zk.client import ControllerMovedError, KafkaZkClient
from support import (
    controller_of,
    create_topic,
    current_controller,
    metadata,
    partition_state,
    run_odradek,
    wait_until,
)


def describe(cluster: LocalCluster, topic: str) -> str:
    return run_odradek("topics", "--zookeeper", cluster.zookeeper_connect, "--describe", "--topic", topic).stdout


def registered(cluster: LocalCluster, broker_id: int) -> bool:
    return bool(cluster.zk_client().exists(f"/brokers/ids/{broker_id}"))


def test_killed_leader_is_replaced_from_the_isr(cluster_factory) -> None:
    cluster = cluster_factory(3)
    create_topic(cluster, "orders", assignment=[[1, 2, 0], [2, 0, 1], [0, 1, 2]])
    controller, _ = controller_of(cluster)
    victim = next(b for b in (1, 2, 0) if b != controller)  # keep the controller: this is about leaders
    led = [p for p in range(3) if partition_state(cluster, "orders", p)["leader"] == victim]
    assert led
    cluster.kill_broker(victim)
    wait_until(lambda: not registered(cluster, victim), timeout=30, message="session expiry")
    wait_until(lambda: all(partition_state(cluster, "orders", p)["leader"] not in (victim, -1) for p in led),
               timeout=30, message="new leaders")
    # The new leaders come from the live ISR.  The dead broker leaves the other partitions' ISRs
    # in a later step of the same BrokerChange event (its replicas go OfflineReplica).
    wait_until(lambda: all(victim not in partition_state(cluster, "orders", p)["isr"] for p in range(3)),
               timeout=30, message="the dead broker out of every ISR")
    for p in range(3):
        state = partition_state(cluster, "orders", p)
        assert state["leader"] in state["isr"]
    for p in led:
        old = partition_state(cluster, "orders", p)
        assert old["leader_epoch"] == 1
    out = describe(cluster, "orders")
    assert f"Leader: {victim}\t" not in out
    assert all(f"Isr: {victim}" not in line and f",{victim}" not in line.split("Isr: ")[1]
               for line in out.splitlines()[1:])


def test_controller_failover_bumps_the_epoch_and_fences_the_old_one(cluster_factory) -> None:
    cluster = cluster_factory(3)
    create_topic(cluster, "fenced", 3, 3)
    old_controller, old_epoch = controller_of(cluster)
    old_epoch_version = cluster.zk_client().get("/controller_epoch")[1].version
    cluster.kill_broker(old_controller)
    wait_until(lambda: (c := current_controller(cluster)) is not None and c[0] != old_controller,
               timeout=30, message="new controller")
    new_controller, new_epoch = controller_of(cluster)
    assert new_controller != old_controller
    assert new_epoch == old_epoch + 1
    # The partitions the old controller led get new leaders under the new epoch.
    wait_until(lambda: all(partition_state(cluster, "fenced", p)["leader"] not in (old_controller, -1)
                           for p in range(3)), message="leaders moved")
    moved = [partition_state(cluster, "fenced", p) for p in range(3)]
    assert any(s["controller_epoch"] == new_epoch for s in moved)
    # The new controller's first UpdateMetadata carries every partition state: a broker whose
    # cache is empty (registered just before the election) must not learn only the brokers.
    first_cached = re.compile(rf"Cached metadata for (\d+) partitions .* epoch {new_epoch} ")
    for broker_id in (b for b in range(3) if b != old_controller):
        path = cluster.brokers[broker_id].config_path.parent / "state-change.log"
        wait_until(lambda path=path: first_cached.search(path.read_text()), message=f"broker {broker_id} metadata")
        assert int(first_cached.search(path.read_text()).group(1)) >= 3

    async def write_with_old_epoch() -> None:
        zk = KafkaZkClient(cluster.zookeeper_connect, 6000)
        await zk.start()
        try:
            await zk.fenced_multi(old_epoch_version,
                                  lambda tx: tx.set_data("/brokers/topics/fenced/partitions/0/state", b"{}"))
        finally:
            await zk.close()

    with pytest.raises(ControllerMovedError):
        asyncio.run(write_with_old_epoch())
    assert partition_state(cluster, "fenced", 0)["leader"] >= 0  # nothing was written


def test_restarted_broker_replicas_come_back_online(cluster_factory) -> None:
    cluster = cluster_factory(3)
    create_topic(cluster, "phoenix", 3, 3)
    controller, _ = controller_of(cluster)
    victim = next(b for b in range(3) if b != controller)
    cluster.kill_broker(victim)
    wait_until(lambda: all(victim not in partition_state(cluster, "phoenix", p)["isr"] for p in range(3)),
               timeout=30, message="victim out of the ISR")
    cluster.start_broker(victim)
    controller_log = cluster.brokers[controller].config_path.parent / "state-change.log"
    victim_log = cluster.brokers[victim].config_path.parent / "state-change.log"
    for p in range(3):
        wait_until(lambda p=p: f"Changed state of replica {victim} for partition phoenix-{p} from OfflineReplica "
                               f"to OnlineReplica" in controller_log.read_text(), message=f"replica online p{p}")
    # The restarted broker was told its role for every partition again.
    text = wait_until(lambda: victim_log.read_text().count("for partition phoenix-") >= 3 and victim_log.read_text())
    assert all(f"transition for partition phoenix-{p}" in text for p in range(3))


def test_unclean_election_only_when_the_topic_allows_it(cluster_factory) -> None:
    cluster = cluster_factory(3, overrides={"zookeeper.session.timeout.ms": "4000"})  # two deaths to notice
    controller, _ = controller_of(cluster)
    a, b = (x for x in range(3) if x != controller)  # keep the controller alive throughout
    create_topic(cluster, "careful", assignment=[[a, b]])
    create_topic(cluster, "reckless", config={"unclean.leader.election.enable": "true"}, assignment=[[a, b]])
    cluster.kill_broker(a)
    wait_until(lambda: partition_state(cluster, "careful", 0)["leader"] == b, timeout=30, message=f"{b} leads")
    cluster.kill_broker(b)
    wait_until(lambda: partition_state(cluster, "careful", 0)["leader"] == -1, timeout=30, message="no leader")
    state = partition_state(cluster, "careful", 0)
    assert state["isr"] == [b]  # the last in-sync replica stays in the ISR
    assert "Leader: none" in describe(cluster, "careful")
    cluster.start_broker(a)  # a is not in the ISR
    wait_until(lambda: partition_state(cluster, "reckless", 0)["leader"] == a, timeout=30,
               message="unclean leader for the reckless topic")
    assert partition_state(cluster, "reckless", 0)["isr"] == [a]
    assert partition_state(cluster, "careful", 0)["leader"] == -1
    controller_log = cluster.brokers[controller].config_path.parent / "state-change.log"
    # The state-change log reaches the file within a fraction of a second (it is buffered).
    wait_until(lambda: "Unclean leader election for partition reckless-0" in controller_log.read_text(),
               message="the unclean election in the state-change log")
    assert "Unclean leader election for partition careful-0" not in controller_log.read_text()


def test_paused_broker_reregisters_after_its_session_expires(cluster_factory) -> None:
    cluster = cluster_factory(3)
    zk = cluster.zk_client()
    controller, epoch = controller_of(cluster)
    before = zk.get(f"/brokers/ids/{controller}")[1].czxid
    cluster.signal_broker(controller, signal.SIGSTOP)
    try:
        wait_until(lambda: not zk.exists(f"/brokers/ids/{controller}"), timeout=40, message="session expiry")
        wait_until(lambda: (c := current_controller(cluster)) is not None and c[0] != controller, timeout=30,
                   message="another controller")
    finally:
        cluster.signal_broker(controller, signal.SIGCONT)
    wait_until(lambda: zk.exists(f"/brokers/ids/{controller}"), timeout=40, message="re-registration")
    assert zk.get(f"/brokers/ids/{controller}")[1].czxid != before
    assert controller_of(cluster)[1] > epoch
    # It takes part in elections again: stop the new controller and see who wins.
    new_controller, new_epoch = controller_of(cluster)
    cluster.stop_broker(new_controller)
    wait_until(lambda: (c := current_controller(cluster)) is not None and c[1] > new_epoch, timeout=40,
               message="third election")
    assert controller_of(cluster)[0] != new_controller


def test_broker_id_taken_exits_and_changes_nothing(cluster_factory, tmp_path) -> None:
    cluster = cluster_factory(1)
    zk = cluster.zk_client()
    before = zk.get("/brokers/ids/0")
    config = tmp_path / "dup.properties"
    config.write_text(f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path / 'dup-data'}\n"
                      f"zookeeper.connect={cluster.zookeeper_connect}\n")
    result = run_odradek("broker", "--config", str(config), timeout=60)
    assert result.returncode != 0
    assert "broker.id 0 is already registered" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert zk.get("/brokers/ids/0") == before
    assert not (tmp_path / "dup-data").exists()
    assert cluster.brokers[0].alive


def test_sigterm_shuts_a_broker_down_cleanly(cluster_factory) -> None:
    cluster = cluster_factory(2)
    cluster.brokers[1].process.send_signal(signal.SIGTERM)
    assert cluster.brokers[1].process.wait(30) == 0
    wait_until(lambda: not registered(cluster, 1), timeout=10, message="deregistration")
    log = cluster.brokers[1].log_path.read_text()
    assert "shut down completed" in log


def test_cluster_json_tracks_restarts(cluster_factory) -> None:
    cluster = cluster_factory(2)
    data = json.loads((cluster.dir / "cluster.json").read_text())
    assert {b["id"] for b in data["brokers"]} == {0, 1}
    assert data["zookeeper"] == cluster.zookeeper_connect
    old_pid = cluster.brokers[1].pid
    cluster.kill_broker(1)
    cluster.start_broker(1)
    data = json.loads((cluster.dir / "cluster.json").read_text())
    assert next(b for b in data["brokers"] if b["id"] == 1)["pid"] == cluster.brokers[1].pid != old_pid


def _metadata_for(port: int, topic: str, timeout_s: float) -> tuple[int, int]:
    """(topic error code, leader of partition 0 or -1) for ``topic``."""
    (answer,) = metadata(("127.0.0.1", port), [topic], timeout_s).topics
    leaders = [p.leader_id for p in answer.partitions if p.partition_index == 0]
    return answer.error_code, leaders[0] if leaders else -1


def _accepting(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_restarted_broker_does_not_deny_a_topic_before_the_controller_reaches_it(cluster_factory) -> None:
    """A broker that has just started has an empty metadata cache until the controller's first
    UpdateMetadata.  Asked about an existing topic in that window it must wait (or say "try
    again"), not answer UNKNOWN_TOPIC_OR_PARTITION: librdkafka fails produce() for a topic it
    is told does not exist."""
    import concurrent.futures

    cluster = cluster_factory(2)
    create_topic(cluster, "kept", assignment=[[0, 1]])
    controller, _ = controller_of(cluster)
    other = 1 - controller
    cluster.stop_broker(other)
    wait_until(lambda: not registered(cluster, other), timeout=10, message="deregistration")
    cluster.signal_broker(controller, signal.SIGSTOP)  # (well inside its ZooKeeper session timeout)
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        cluster.start_broker(other, wait=False)
        port = cluster.brokers[other].port
        wait_until(lambda: _accepting(port), timeout=30, message="restarted broker listening")
        answer = pool.submit(_metadata_for, port, "kept", 30)
        with pytest.raises(concurrent.futures.TimeoutError):
            answer.result(timeout=1)  # not answered from the empty cache
        cluster.signal_broker(controller, signal.SIGCONT)
        error_code, leader = answer.result(timeout=20)
    finally:
        cluster.signal_broker(controller, signal.SIGCONT)
        pool.shutdown(wait=True)
    assert error_code == 0
    assert leader == controller


def test_restarted_broker_answers_nothing_until_it_is_registered(cluster_factory) -> None:
    """A SIGKILLed broker restarted at once waits for its old ZooKeeper session to expire
    before it registers, and only then can the controller send it metadata.  Requests that
    arrive meanwhile wait (Kafka's startProcessingRequests): answered from the empty cache, an
    all-topics Metadata would tell the client that every topic is gone."""
    cluster = cluster_factory(2, overrides={"zookeeper.session.timeout.ms": "10000"})
    create_topic(cluster, "kept", assignment=[[0, 1]])
    controller, _ = controller_of(cluster)
    other = 1 - controller
    cluster.kill_broker(other)
    cluster.start_broker(other, wait=False)
    port = cluster.brokers[other].port
    wait_until(lambda: _accepting(port), timeout=30, message="restarted broker listening")
    assert registered(cluster, other)  # still the dead process's registration
    topics = {t.name: t.error_code for t in metadata(("127.0.0.1", port), None, 60).topics}
    assert topics.get("kept") == 0, topics
    log = cluster.brokers[other].log_path.read_text()
    assert "Waiting up to" in log  # the restart really did wait for the old session
