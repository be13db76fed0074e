"""The client quota entities in ZooKeeper: every ``/config/users/<user>``,
``/config/users/<user>/clients/<client>`` and ``/config/clients/<client>`` with its config map
(Kafka's AdminZkClient.fetchAllEntityConfigs and fetchAllChildEntityConfigs).  A user's map
holds its SCRAM credentials too; which keys are quotas is the reader's business."""

from __future__ import annotations

from typing import Protocol

from odradek.zk.zk_data import ClientQuotaEntity, ConfigEntityTypeZNode, ConfigEntityZNode

__all__ = ["EntityConfigReader", "read_client_quota_entities"]


class EntityConfigReader(Protocol):
    """The two reads it takes (KafkaZkClient has them)."""

    async def get_children(self, path: str) -> list[str] | None: ...

    async def get_entity_config(self, entity_type: str, entity: str) -> dict[str, str] | None: ...


async def read_client_quota_entities(zk: EntityConfigReader) -> dict[ClientQuotaEntity, dict[str, str]]:
    """Every user, user-and-client and client entity, with its stored config (possibly empty)."""
    entities: list[ClientQuotaEntity] = []
    for user in sorted(await zk.get_children(ConfigEntityTypeZNode.path("users")) or []):
        entities.append(ClientQuotaEntity(user, None))
        clients_path = ConfigEntityZNode.path("users", f"{user}/clients")
        entities += [ClientQuotaEntity(user, c) for c in sorted(await zk.get_children(clients_path) or [])]
    entities += [ClientQuotaEntity(None, c) for c in sorted(await zk.get_children(ConfigEntityTypeZNode.path("clients")) or [])]
    configs = {}
    for entity in entities:
        config = await zk.get_entity_config(*entity.config_entity())
        if config is not None:
            configs[entity] = config
    return configs
