"""``odradek broker-api-versions``: Kafka 2.8's BrokerApiVersionsCommand
(kafka-broker-api-versions.sh).

For every broker of the cluster one block: ``host:port (id: N rack: R) -> (`` then, one line
each in api key order, what the broker advertises in ApiVersions (``Name(key): min to max``)
and what Kafka 2.8's client could use of it (``[usable: v]``, ``[unusable: node too new]`` or
``too old``); APIs of 2.8's ZooKeeper-mode broker that the broker does not advertise are
``UNSUPPORTED``, keys 2.8 does not know ``UNKNOWN(key)``.  Kafka's tool prints the brokers
in a random order (its Cluster shuffles them); this one prints them by id.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["KAFKA_28_APIS", "broker_block", "node_text"]

# Kafka 2.8.2's ApiKeys: (key, name, oldest version, latest version, in its ZooKeeper-mode broker).
KAFKA_28_APIS: tuple[tuple[int, str, int, int, bool], ...] = (
    (0, "Produce", 0, 9, True),
    (1, "Fetch", 0, 12, True),
    (2, "ListOffsets", 0, 6, True),
    (3, "Metadata", 0, 11, True),
    (4, "LeaderAndIsr", 0, 5, True),
    (5, "StopReplica", 0, 3, True),
    (6, "UpdateMetadata", 0, 7, True),
    (7, "ControlledShutdown", 0, 3, True),
    (8, "OffsetCommit", 0, 8, True),
    (9, "OffsetFetch", 0, 7, True),
    (10, "FindCoordinator", 0, 3, True),
    (11, "JoinGroup", 0, 7, True),
    (12, "Heartbeat", 0, 4, True),
    (13, "LeaveGroup", 0, 4, True),
    (14, "SyncGroup", 0, 5, True),
    (15, "DescribeGroups", 0, 5, True),
    (16, "ListGroups", 0, 4, True),
    (17, "SaslHandshake", 0, 1, True),
    (18, "ApiVersions", 0, 3, True),
    (19, "CreateTopics", 0, 7, True),
    (20, "DeleteTopics", 0, 6, True),
    (21, "DeleteRecords", 0, 2, True),
    (22, "InitProducerId", 0, 4, True),
    (23, "OffsetForLeaderEpoch", 0, 4, True),
    (24, "AddPartitionsToTxn", 0, 3, True),
    (25, "AddOffsetsToTxn", 0, 3, True),
    (26, "EndTxn", 0, 3, True),
    (27, "WriteTxnMarkers", 0, 1, True),
    (28, "TxnOffsetCommit", 0, 3, True),
    (29, "DescribeAcls", 0, 2, True),
    (30, "CreateAcls", 0, 2, True),
    (31, "DeleteAcls", 0, 2, True),
    (32, "DescribeConfigs", 0, 4, True),
    (33, "AlterConfigs", 0, 2, True),
    (34, "AlterReplicaLogDirs", 0, 2, True),
    (35, "DescribeLogDirs", 0, 2, True),
    (36, "SaslAuthenticate", 0, 2, True),
    (37, "CreatePartitions", 0, 3, True),
    (38, "CreateDelegationToken", 0, 2, True),
    (39, "RenewDelegationToken", 0, 2, True),
    (40, "ExpireDelegationToken", 0, 2, True),
    (41, "DescribeDelegationToken", 0, 2, True),
    (42, "DeleteGroups", 0, 2, True),
    (43, "ElectLeaders", 0, 2, True),
    (44, "IncrementalAlterConfigs", 0, 1, True),
    (45, "AlterPartitionReassignments", 0, 0, True),
    (46, "ListPartitionReassignments", 0, 0, True),
    (47, "OffsetDelete", 0, 0, True),
    (48, "DescribeClientQuotas", 0, 1, True),
    (49, "AlterClientQuotas", 0, 1, True),
    (50, "DescribeUserScramCredentials", 0, 0, True),
    (51, "AlterUserScramCredentials", 0, 0, True),
    (52, "Vote", 0, 0, False),
    (53, "BeginQuorumEpoch", 0, 0, False),
    (54, "EndQuorumEpoch", 0, 0, False),
    (55, "DescribeQuorum", 0, 0, False),
    (56, "AlterIsr", 0, 0, True),
    (57, "UpdateFeatures", 0, 0, True),
    (58, "Envelope", 0, 0, False),
    (59, "FetchSnapshot", 0, 0, False),
    (60, "DescribeCluster", 0, 0, True),
    (61, "DescribeProducers", 0, 0, True),
    (62, "BrokerRegistration", 0, 0, False),
    (63, "BrokerHeartbeat", 0, 0, False),
    (64, "UnregisterBroker", 0, 0, False),
)
_BY_KEY = {key: (name, oldest, latest) for key, name, oldest, latest, _ in KAFKA_28_APIS}
_ZK_BROKER_APIS = [key for key, *_, zk_broker in KAFKA_28_APIS if zk_broker]


def node_text(broker_id: int, host: str, port: int, rack: str | None) -> str:
    """Kafka's ``Node.toString()``."""
    return f"{host}:{port} (id: {broker_id} rack: {rack if rack is not None else 'null'})"


def _api_text(key: int, low: int, high: int) -> str:
    versions = str(low) if low == high else f"{low} to {high}"
    if key not in _BY_KEY:
        return f"UNKNOWN({key}): {versions}"
    name, oldest, latest = _BY_KEY[key]
    if latest < low:
        usable = "[unusable: node too new]"
    elif high < oldest:
        usable = "[unusable: node too old]"
    else:
        usable = f"[usable: {min(latest, high)}]"
    return f"{name}({key}): {versions} {usable}"


def broker_block(node: str, advertised: Mapping[int, tuple[int, int]]) -> str:
    """One broker's block (several lines, no newline at the end): ``node -> (`` ... ``)``."""
    texts = {key: _api_text(key, low, high) for key, (low, high) in advertised.items()}
    for key in _ZK_BROKER_APIS:
        texts.setdefault(key, f"{_BY_KEY[key][0]}({key}): UNSUPPORTED")
    return f"{node} -> (\n\t" + ",\n\t".join(texts[key] for key in sorted(texts)) + "\n)"
