"""The documented differences: every one is a section of docs/COMPATIBILITY.md (its ``id``),
and every one is checked both ways.  A difference the oracle finds must be listed here (or
fixed); a difference listed here for a case must still show in that case (or be removed from
here and from the page), so the list stays true.

``KNOWN``: differences in the answers to the cases.  ``ADVERTISED``: the api keys whose
ApiVersions ranges differ, and why.  ``FRAMES``: malformed frames handled differently.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from oracle.case import CaseRun
from oracle.compare import Difference, matching

from odradek.protocol.api_keys import ApiKey as A

__all__ = ["ADVERTISED", "FRAMES", "KNOWN", "Known", "unexplained"]


@dataclass(frozen=True)
class Known:
    """Cases of ``api`` whose scenario matches one of the globs ``scenarios`` (at
    ``versions``, all when None) differ at the paths the globs ``paths`` match (see
    compare.path_pattern); ``id`` names the section of docs/COMPATIBILITY.md."""

    id: str
    api: A
    scenarios: str | tuple[str, ...]
    paths: tuple[str, ...]
    versions: tuple[int, int] | None = None

    def applies(self, run: CaseRun) -> bool:
        scenarios = (self.scenarios,) if isinstance(self.scenarios, str) else self.scenarios
        return (run.case.api == self.api and any(fnmatch.fnmatchcase(run.case.scenario, s) for s in scenarios)
                and (self.versions is None or self.versions[0] <= run.version <= self.versions[1]))


# Topic configs Kafka 3.x added (tiered storage, KIP-405; compression levels, KIP-390;
# KIP-937's timestamp bounds), which Kafka 2.8 and odradek do not have.
KAFKA_3_TOPIC_CONFIGS = ("remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable",
                         "local.retention.ms", "local.retention.bytes", "compression.gzip.level",
                         "compression.lz4.level", "compression.zstd.level", "message.timestamp.after.max.ms",
                         "message.timestamp.before.max.ms")


def _topic_configs(prefix: str) -> tuple[str, ...]:
    return tuple(f"{prefix}[{name}]" for name in KAFKA_3_TOPIC_CONFIGS)


KNOWN: list[Known] = [
    Known("produce-null-records", A.PRODUCE, "null-records", ("**",)),
    Known("min-insync-replicas-capped", A.PRODUCE, "not-enough-replicas",
          ("responses[*].partition_responses[0].error_code", "responses[*].partition_responses[0].base_offset",
           "responses[*].partition_responses[0].log_start_offset")),
    Known("auto-create-topics-default", A.METADATA, "auto-create",
          ("first.topics[*].error_code", "later.topics[*].error_code", "later.topics[*].topic_id",
           "later.topics[*].partitions**")),
    Known("auto-create-topics-default", A.METADATA, "unknown-topic-auto-created", ("topics[*].error_code",)),
    Known("kafka-3-topic-configs", A.DESCRIBE_CONFIGS, "topic-all", _topic_configs("results[*].configs")),
    Known("kafka-3-topic-configs", A.CREATE_TOPICS, ("valid", "with-configs", "validate-only", "defaults",
                                                      "assignment", "on-controller"),
          _topic_configs("create.topics[*].configs"),
          (5, 7)),
    Known("config-documentation", A.DESCRIBE_CONFIGS, "topic-documentation", ("results[*].configs[*].documentation",)),
    Known("null-topic-config", A.CREATE_TOPICS, "null-config-value", ("create.topics[*].error_code",)),
    Known("assignment-to-unknown-broker", A.CREATE_TOPICS, "assignment-unknown-broker",
          ("create.topics[*].error_code", "create.topics[*].topic_id")),
    Known("incremental-alter-invalid-operation", A.INCREMENTAL_ALTER_CONFIGS, "invalid-operation",
          ("alter.responses[*].error_code",)),
    Known("verify-only-transaction-abortable", A.ADD_PARTITIONS_TO_TXN, "verify-only-not-added",
          ("results_by_transaction[*].topic_results[*].results_by_partition[*].partition_error_code",)),
    Known("finalized-features-epoch", A.API_VERSIONS, "answer", ("finalized_features_epoch",), (3, 4)),
    Known("describe-scram-credentials-unauthorized", A.DESCRIBE_USER_SCRAM_CREDENTIALS, "denied", ("**",)),
    Known("txn-offset-commit-verification", A.TXN_OFFSET_COMMIT, "offsets-not-added",
          ("topics[*].partitions[*].error_code",)),
]

# api key -> the sections of docs/COMPATIBILITY.md on why the two ApiVersions answers differ
# for it (the ranges themselves are in kafka_versions.KAFKA_3_9 and odradek's handler table).
_NEWER, _REMOVED, _CONTROL, _ONLY_KAFKA = "newer-versions", "removed-versions", "control-versions", "kafka-only-apis"
ADVERTISED: dict[int, tuple[str, ...]] = {
    A.PRODUCE: (_NEWER,), A.FETCH: (_REMOVED, _NEWER), A.LIST_OFFSETS: (_REMOVED, _NEWER),
    A.LEADER_AND_ISR: (_CONTROL,), A.STOP_REPLICA: (_CONTROL,), A.UPDATE_METADATA: (_CONTROL,),
    A.CONTROLLED_SHUTDOWN: (_CONTROL,), A.ALTER_PARTITION: (_CONTROL,),
    A.OFFSET_COMMIT: (_REMOVED, _NEWER), A.OFFSET_FETCH: (_REMOVED, _NEWER), A.FIND_COORDINATOR: (_NEWER,),
    A.CREATE_TOPICS: (_REMOVED,), A.DELETE_TOPICS: (_REMOVED,), A.INIT_PRODUCER_ID: (_NEWER,),
    A.OFFSET_FOR_LEADER_EPOCH: (_REMOVED,), A.ADD_PARTITIONS_TO_TXN: (_NEWER,), A.ADD_OFFSETS_TO_TXN: (_NEWER,),
    A.END_TXN: (_NEWER,), A.WRITE_TXN_MARKERS: (_REMOVED,), A.TXN_OFFSET_COMMIT: (_NEWER,),
    A.DESCRIBE_ACLS: (_REMOVED, _NEWER), A.CREATE_ACLS: (_REMOVED, _NEWER), A.DELETE_ACLS: (_REMOVED, _NEWER),
    A.DESCRIBE_CONFIGS: (_REMOVED,), A.LIST_TRANSACTIONS: (_NEWER,),
    A.DESCRIBE_LOG_DIRS: (_REMOVED,), A.ALTER_REPLICA_LOG_DIRS: (_REMOVED,), A.ALTER_PARTITION_REASSIGNMENTS: (_NEWER,),
    **{key: (_ONLY_KAFKA,) for key in (38, 39, 40, 41, 57, 58, 67, 68, 69)},
}

# malformed frame name -> the section of docs/COMPATIBILITY.md on why both sides differ.
FRAMES: dict[str, str] = {
    "metadata-v12-forged-topic-count": "varint-overflow",
    "metadata-v1-invalid-utf8": "invalid-utf8",
}


def unexplained(run: CaseRun, differences: Iterable[Difference]) -> tuple[list[Difference], list[Known]]:
    """The differences no documented entry covers, and the entries for this case whose
    difference did not show."""
    differences = list(differences)
    explained: set[str] = set()
    vanished = []
    for known in (k for k in KNOWN if k.applies(run)):
        hits = [d.path for pattern in known.paths for d in matching(differences, pattern)]
        if not hits:
            vanished.append(known)
        explained.update(hits)
    return [d for d in differences if d.path not in explained], vanished
