"""Connections from this broker to its peers over the inter-broker listener, one per peer,
opened on first use and reopened after a failure (the transaction coordinator's marker
channel and the KIP-890 verifier each keep one set)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING

from odradek.net.client import BrokerConnection
from odradek.security.client import ClientSecurity

if TYPE_CHECKING:
    from odradek.broker.metadata_cache import MetadataCache

__all__ = ["PeerConnections"]


class PeerConnections:
    def __init__(self, broker_id: int, metadata_cache: MetadataCache, listener_name: str, purpose: str, *,
                 security: ClientSecurity | None = None) -> None:
        self.security = security
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.listener_name = listener_name
        self.purpose = purpose  # names the connection in the peer's log: broker-<id>-<purpose>
        self._connections: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    async def get(self, broker_id: int) -> BrokerConnection:
        """The open connection to ``broker_id``; LookupError when the metadata cache has no
        endpoint for it, OSError/TimeoutError when it cannot be reached."""
        async with self._locks[broker_id]:
            conn = self._connections.get(broker_id)
            if conn is not None and conn.connected:
                return conn
            endpoint = self.metadata_cache.endpoint(broker_id, self.listener_name)
            if endpoint is None:
                raise LookupError(f"no {self.listener_name} endpoint for broker {broker_id}")
            conn = BrokerConnection(endpoint[0], endpoint[1], f"broker-{self.broker_id}-{self.purpose}",
                                    security=self.security)
            await conn.connect(timeout_s=10)
            self._connections[broker_id] = conn
            return conn

    async def drop(self, broker_id: int) -> None:
        """Close the connection to ``broker_id`` (after a failure on it)."""
        conn = self._connections.pop(broker_id, None)
        if conn is not None:
            await conn.close()

    async def close(self) -> None:
        for broker_id in list(self._connections):
            await self.drop(broker_id)
