"""KafkaServer: wires one broker together and runs its start-up and shutdown sequences."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
from typing import Any

from odradek import state_change_log
from odradek.broker.apis import load_handlers
from odradek.broker.apis.api_versions import unsupported_api_versions
from odradek.broker.authorizer import AclCacheError, ZkAclCache, authorizer_enabled
from odradek.broker.config_manager import DynamicConfigManager
from odradek.broker.credentials import CredentialCache
from odradek.broker.fetch_session import FetchSessionCache
from odradek.broker.group.coordinator import GroupCoordinator
from odradek.broker.group.group_config import GroupConfig
from odradek.broker.group.group_metadata_manager import GroupMetadataManager
from odradek.broker.group.offsets_topic import ReplicatedOffsetsTopic
from odradek.broker.group.scheduler import AsyncioScheduler
from odradek.broker.listener_security import ListenerSecurityError, listener_security
from odradek.broker.log_dir_failure_handler import LogDirFailureHandler
from odradek.broker.metadata_cache import MetadataCache
from odradek.broker.metrics.metrics_server import MetricsServer
from odradek.broker.metrics.request_metrics import RequestMetrics
from odradek.broker.peer_connections import PeerConnections
from odradek.broker.producer_id_manager import ProducerIdManager
from odradek.broker.quota.quota_managers import QuotaManagers
from odradek.broker.quota.throttling import handle_with_quotas
from odradek.broker.replica_manager import ReplicaManager
from odradek.broker.transaction.coordinator import TransactionCoordinator
from odradek.broker.transaction.marker_channel import TransactionMarkerChannelManager
from odradek.broker.transaction.state_manager import TransactionStateManager
from odradek.broker.transaction.state_topic import ReplicatedTransactionStateTopic
from odradek.broker.transaction.txn_config import TxnConfig
from odradek.broker.transaction.verifier import TxnVerifier
from odradek.broker.zk_session_log import ZkSessionStateLog
from odradek.common import now_ms
from odradek.config import KafkaConfig
from odradek.controller.controller import KafkaController
from odradek.log.cleaner.log_cleaner import LogCleaner
from odradek.log.log_manager import LogDirLockedError, LogManager, LogManagerConfig
from odradek.log.meta_properties import InconsistentBrokerMetadataError
from odradek.net.client import BrokerConnection
from odradek.net.server import Request, Response, SocketServer
from odradek.protocol import control
from odradek.protocol.errors import ErrorCode, KafkaStorageError
from odradek.security.acls import AclAuthorizer
from odradek.security.client import ClientSecurity
from odradek.zk.acl_store import ZkAclStore
from odradek.zk.admin_zk_client import AdminZkClient
from odradek.zk.client import KafkaZkClient, NodeExistsError
from odradek.zk.zk_data import BrokerIdZNode, BrokerInfo, EndPoint

log = logging.getLogger(__name__)

__all__ = ["BrokerIdTakenError", "BrokerStartupError", "KafkaServer"]


class BrokerStartupError(RuntimeError):
    """The broker cannot start (the message says why, in one line)."""


class BrokerIdTakenError(BrokerStartupError):
    """Another live broker is registered with this broker.id."""


class KafkaServer:
    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk = KafkaZkClient(config.zookeeper_connect, config["zookeeper.session.timeout.ms"],
                                config["zookeeper.connection.timeout.ms"])
        self.metadata_cache = MetadataCache(self.broker_id)
        self.broker_epoch = -1
        self.cluster_id: str | None = None
        # How this broker's own connections to the inter-broker listener authenticate.
        self.inter_broker_security = ClientSecurity.from_properties(config.inter_broker_client_properties())
        self.log_manager = LogManager(LogManagerConfig.from_kafka_config(config), config.log_config())
        self.log_cleaner = LogCleaner(config.cleaner_config(), self.log_manager.live_log_dirs,
                                      self.log_manager.all_logs, self.log_manager.get_log)
        txn_config = TxnConfig.from_kafka_config(config)
        # KIP-890: transactional produce checks its partition is in the transaction.  The
        # coordinator writes through the replica manager, so it is built after it and the
        # verifier finds it through a lambda (as Kafka's AddPartitionsToTxnManager does).
        self.txn_verifier: TxnVerifier | None = None
        if txn_config.partition_verification:
            self.txn_verifier = TxnVerifier(lambda: self.transaction_coordinator, self.broker_id,
                                            self.metadata_cache, config.inter_broker_listener_name,
                                            security=self.inter_broker_security)
        self.replica_manager = ReplicaManager(self.broker_id, config, self.metadata_cache, self.log_manager,
                                              lambda: self.broker_epoch,
                                              lambda _topic, overrides: self.config.log_config(overrides),
                                              inter_broker_security=self.inter_broker_security,
                                              txn_verifier=self.txn_verifier)
        # A failed log directory: its partitions go offline here, the controller is told.
        self.log_dir_failure_handler = LogDirFailureHandler(
            self.log_manager.failure_channel, self.replica_manager,
            lambda: self.zk.propagate_log_dir_event(self.broker_id), _halt)
        self.fetch_sessions = FetchSessionCache(config["max.incremental.fetch.session.cache.slots"])
        # Client quotas (users/..., clients/... in ZooKeeper, through the config manager).
        self.quotas = QuotaManagers.from_kafka_config(config)
        self.topic_admin = AdminZkClient(self.zk)
        self.producer_ids = ProducerIdManager(self.broker_id, self.zk)
        # Consumer groups: follows leadership of __consumer_offsets through the replica manager's hooks.
        group_config = GroupConfig.from_kafka_config(config)
        offsets_topic = ReplicatedOffsetsTopic(self.replica_manager, group_config.offsets_commit_timeout_ms,
                                               group_config.offsets_load_buffer_size)
        self.group_coordinator = GroupCoordinator(group_config, GroupMetadataManager(group_config, offsets_topic),
                                                  AsyncioScheduler())
        self.replica_manager.on_become_leader.append(self.group_coordinator.became_leader)
        self.replica_manager.on_become_follower.append(self.group_coordinator.became_follower)
        self.replica_manager.on_stop_replica.append(self.group_coordinator.replicas_stopped)
        # Transactions: follows leadership of __transaction_state the same way.
        self.txn_marker_channel = TransactionMarkerChannelManager(self.broker_id, self.metadata_cache,
                                                                  config.inter_broker_listener_name,
                                                                  security=self.inter_broker_security)
        self.transaction_coordinator = TransactionCoordinator(
            txn_config, TransactionStateManager(txn_config, ReplicatedTransactionStateTopic(
                self.replica_manager, txn_config.append_timeout_ms, txn_config.load_buffer_size)),
            self.producer_ids.next_id, self.txn_marker_channel)
        self.replica_manager.on_become_leader.append(self.transaction_coordinator.became_leader)
        self.replica_manager.on_become_follower.append(self.transaction_coordinator.became_follower)
        self.replica_manager.on_stop_replica.append(self.transaction_coordinator.replicas_stopped)
        # Authorization (authorizer.class.name): None lets every request through, as Kafka
        # without an authorizer.  The ACL cache is loaded from ZooKeeper at start-up.
        self.authorizer: AclAuthorizer | None = None
        self.acl_cache: ZkAclCache | None = None
        self.acl_store = ZkAclStore(self.zk)  # CreateAcls, DescribeAcls, DeleteAcls
        self.handlers = load_handlers()
        # SCRAM credentials from /config/users, kept current by the config manager.
        self.credential_cache = CredentialCache()
        # Prometheus metrics (metrics.port): without them, no request is timed and the paths
        # only add to plain int counters.
        self.request_metrics: RequestMetrics | None = None
        self.metrics_server: MetricsServer | None = None
        if config["metrics.port"] is not None:
            self.request_metrics = RequestMetrics()
            self.metrics_server = MetricsServer(
                self, self.request_metrics, self.metadata_cache,
                PeerConnections(self.broker_id, self.metadata_cache, config.inter_broker_listener_name, "metrics",
                                security=self.inter_broker_security))
            self.zk.add_state_listener(self.metrics_server.zk_state_changed)
        self.socket_server = SocketServer(
            config.listeners, self.dispatch, on_unsupported=unsupported_api_versions,
            max_request_bytes=config["socket.request.max.bytes"], observer=self.request_metrics)
        self.controller = KafkaController(config, self.zk, self.register_broker,
                                          inter_broker_security=self.inter_broker_security)
        # Dynamic topic configs: applies /config/changes notifications to the open logs.
        self.config_manager = DynamicConfigManager(self.zk, config, self.log_manager,
                                                   self.controller.enable_topic_unclean_leader_election,
                                                   on_broker_config=self.apply_broker_config,
                                                   on_user_config=self.credential_cache.update,
                                                   on_quota_config=self.quotas.update,
                                                   on_topic_config=self.replica_manager.update_throttled_replicas)
        self.broker_info: BrokerInfo | None = None
        self._started = False
        # Kafka's startProcessingRequests: the listener is bound early (its port goes into the
        # registration) but requests wait until the broker is registered, so nothing is
        # answered from state the controller has not had a chance to send.
        self.serving = asyncio.Event()
        self.shutdown_requested = asyncio.Event()

    # ------------------------------------------------------------------ requests

    def dispatch(self, request: Request) -> Response | Any:
        spec = self.handlers.get(request.api_key)
        if spec is None or not spec.min_version <= request.api_version <= spec.max_version:
            raise UnsupportedVersion(f"api key {request.api_key} version {request.api_version} is not supported")
        if not self.serving.is_set():
            return self._dispatch_once_serving(spec.handler, request)
        if self.quotas.enabled:
            return handle_with_quotas(self.quotas, spec.handler, self, request)
        return spec.handler(self, request)

    async def _dispatch_once_serving(self, handler: Any, request: Request) -> Response:
        await self.serving.wait()
        result = handler(self, request)
        return await result if inspect.isawaitable(result) else result

    def apply_broker_config(self, new: KafkaConfig) -> None:
        """A dynamic broker config changed (DynamicConfigManager): new topic defaults for
        every log (and for logs created from now on), new settings for the log cleaner."""
        self.config = new
        self.log_manager.update_default_config(new.log_config())
        self.log_cleaner.reconfigure(new.cleaner_config())
        self.replica_manager.update_replication_throttles(new)

    # ------------------------------------------------------------------ start-up

    async def startup(self) -> None:
        try:
            with_acls = authorizer_enabled(self.config)
        except ValueError as e:
            raise BrokerStartupError(str(e)) from None
        try:
            self.socket_server.security = listener_security(self.config, self.credential_cache.get)
        except ListenerSecurityError as e:
            raise BrokerStartupError(str(e)) from None
        self.zk.add_state_listener(ZkSessionStateLog(self.broker_id, self.zk))
        await self.zk.start()
        stale = await self._check_existing_registration()
        await self.zk.create_top_level_paths()
        self.cluster_id = await self.zk.get_or_create_cluster_id()
        topic_configs = await self.config_manager.stored_topic_log_configs()
        try:
            self.log_manager.startup(topic_configs)  # creates and locks the directories, recovers the logs
            self.log_manager.check_and_write_meta_properties(self.broker_id, self.cluster_id)
        except (LogDirLockedError, InconsistentBrokerMetadataError, KafkaStorageError, OSError) as e:
            await self.zk.close()
            raise BrokerStartupError(f"cannot use log.dirs {','.join(self.config.log_dirs)}: {e}") from None
        self.log_dir_failure_handler.start()
        self.replica_manager.startup()
        await self.log_cleaner.startup()
        await self.group_coordinator.startup(self.zk)
        await self.transaction_coordinator.startup(self.zk)
        # Topic config overrides reach the logs before any request can.
        await self.config_manager.startup()
        if with_acls:
            await self._start_authorizer()
        try:
            ports = await self.socket_server.start()
        except OSError as e:
            await self.replica_manager.shutdown()
            await self.log_cleaner.shutdown()
            self.log_manager.shutdown()
            await self.zk.close()
            raise BrokerStartupError(f"cannot listen on {', '.join(lst.name + '://' + (lst.host or '0.0.0.0') + ':' + str(lst.port) for lst in self.config.listeners)}: {e.strerror or e}") from None
        self.broker_info = self._broker_info(ports)
        if self.metrics_server is not None:
            await self._start_metrics()
        if stale:
            await self._wait_for_stale_registration()
        try:
            await self.register_broker()
        except BrokerIdTakenError:
            await self.socket_server.stop()
            await self.replica_manager.shutdown()
            await self.log_cleaner.shutdown()
            self.log_manager.shutdown()
            await self.zk.close()
            raise
        self.controller.startup()
        self._started = True
        self.serving.set()
        endpoints = ", ".join(e.connection_string for e in self.broker_info.endpoints)
        log.info("[KafkaServer id=%d] started (%s), cluster id %s", self.broker_id, endpoints, self.cluster_id)

    async def _start_metrics(self) -> None:
        """Serve /metrics on the first listener's host (all addresses when it names none)."""
        assert self.metrics_server is not None
        host = self.config.listeners[0].host or ""
        try:
            port = await self.metrics_server.start(host, self.config["metrics.port"])
        except OSError as e:
            await self.socket_server.stop()
            await self.replica_manager.shutdown()
            await self.log_cleaner.shutdown()
            self.log_manager.shutdown()
            await self.zk.close()
            raise BrokerStartupError(f"cannot serve metrics on {host or '0.0.0.0'}:{self.config['metrics.port']}: "
                                     f"{e.strerror or e}") from None
        log.info("[KafkaServer id=%d] metrics at http://%s:%d/metrics", self.broker_id, host or "0.0.0.0", port)

    async def _start_authorizer(self) -> None:
        """Load the ACLs and follow their changes (Kafka's AclAuthorizer.configure), before the
        listeners open: no request is ever served unauthorized."""
        cache = ZkAclCache(self.zk)
        try:
            await cache.startup()
        except AclCacheError as e:
            await cache.shutdown()
            await self.config_manager.shutdown()
            await self.replica_manager.shutdown()
            await self.log_cleaner.shutdown()
            self.log_manager.shutdown()
            await self.zk.close()
            raise BrokerStartupError(str(e)) from None
        self.acl_cache = cache
        self.authorizer = cache.authorizer(self.config)

    async def _check_existing_registration(self) -> bool:
        """Refuse to start if a live broker holds our id.  A registration with exactly our
        advertised endpoints is our own previous life (SIGKILLed, its session not yet
        expired): if we can bind those endpoints it is dead, so we wait for it to expire."""
        got = await self.zk.get(BrokerIdZNode.path(self.broker_id))
        if got is None:
            return False
        existing = BrokerIdZNode.decode(self.broker_id, got[0])
        ours = {EndPoint(lst.name, lst.host, lst.port).connection_string for lst in self.config.advertised_listeners}
        if all(lst.port for lst in self.config.advertised_listeners) and \
                {e.connection_string for e in existing.endpoints} == ours:
            return True
        await self.zk.close()
        raise BrokerIdTakenError(
            f"broker.id {self.broker_id} is already registered in ZooKeeper by a live broker at "
            f"{','.join(e.connection_string for e in existing.endpoints)} ({BrokerIdZNode.path(self.broker_id)}); "
            "refusing to start a second broker with that id")

    async def _wait_for_stale_registration(self) -> None:
        path = BrokerIdZNode.path(self.broker_id)
        timeout_s = self.config["zookeeper.session.timeout.ms"] / 1000 * 2 + 5
        log.info("Waiting up to %.0fs for the previous registration of broker %d (a dead process) to expire",
                 timeout_s, self.broker_id)
        gone = asyncio.Event()
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            gone.clear()
            if await self.zk.exists(path, watch=lambda _e: gone.set()) is None:
                return
            try:
                await asyncio.wait_for(gone.wait(), 1.0)
            except TimeoutError:
                pass

    def _broker_info(self, bound_ports: dict[str, int]) -> BrokerInfo:
        endpoints = []
        for listener in self.config.advertised_listeners:
            port = listener.port or bound_ports.get(listener.name, 0)
            host = listener.host or socket.getfqdn()
            protocol = self.config.security_protocol_map.get(listener.name, listener.name)
            endpoints.append(EndPoint(listener.name, host, port, protocol))
        return BrokerInfo(self.broker_id, tuple(endpoints), self.config.rack, now_ms())

    async def register_broker(self) -> int:
        assert self.broker_info is not None
        try:
            self.broker_epoch = await self.zk.register_broker(self.broker_info)
        except NodeExistsError:
            raise BrokerIdTakenError(
                f"broker.id {self.broker_id} is already registered in ZooKeeper by a live broker "
                f"({BrokerIdZNode.path(self.broker_id)})") from None
        log.info("Registered broker %d at path %s with addresses: %s, czxid (broker epoch): %d",
                 self.broker_id, BrokerIdZNode.path(self.broker_id),
                 ",".join(e.connection_string for e in self.broker_info.endpoints), self.broker_epoch)
        return self.broker_epoch

    # ------------------------------------------------------------------ shutdown

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        log.info("[KafkaServer id=%d] shutting down", self.broker_id)
        if self.config["controlled.shutdown.enable"]:
            try:
                await self._controlled_shutdown()
            except (TimeoutError, ConnectionError, OSError) as e:
                # Typically the controller is stopping at the same moment.
                log.warning("controlled shutdown failed (%s); proceeding with unclean shutdown", e)
            except Exception:
                log.warning("controlled shutdown failed; proceeding with unclean shutdown", exc_info=True)
        # Each step is bounded: a stuck one is named in the log and the rest still run, so
        # logs are closed cleanly (clean-shutdown marker) whatever happens.
        if self.metrics_server is not None:
            await _bounded("metrics server", self.metrics_server.stop(), 5)
        await _bounded("socket server", self.socket_server.stop(), 10)
        await _bounded("dynamic config manager", self.config_manager.shutdown(), 5)
        if self.acl_cache is not None:
            await _bounded("ACL cache", self.acl_cache.shutdown(), 5)
        await _bounded("group coordinator", self.group_coordinator.shutdown(), 5)
        await _bounded("transaction coordinator", self.transaction_coordinator.shutdown(), 5)
        await _bounded("transaction marker channel", self.txn_marker_channel.shutdown(), 5)
        if self.txn_verifier is not None:
            await _bounded("transaction verifier", self.txn_verifier.shutdown(), 5)
        await _bounded("log dir failure handler", self.log_dir_failure_handler.shutdown(), 5)
        await _bounded("replica manager", self.replica_manager.shutdown(), 10)
        await _bounded("controller", self.controller.shutdown(), 15)
        await _bounded("log cleaner", self.log_cleaner.shutdown(), 10)
        self.log_manager.shutdown()
        await _bounded("ZooKeeper client", self.zk.close(), 10)
        state_change_log.flush()
        log.info("[KafkaServer id=%d] shut down completed", self.broker_id)

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away before stopping (Kafka's controlled
        shutdown): retried until the controller reports nothing left or retries run out."""
        retries = self.config["controlled.shutdown.max.retries"]
        backoff_s = self.config["controlled.shutdown.retry.backoff.ms"] / 1000
        for attempt in range(retries + 1):
            controller_id = await self.zk.get_controller_id()
            if controller_id is None:
                log.info("controlled shutdown: no active controller")
            else:
                brokers = await self.zk.get_brokers([controller_id])
                if controller_id in brokers:
                    info = brokers[controller_id][0]
                    ep = next((e for e in info.endpoints if e.listener == self.config.inter_broker_listener_name),
                              info.endpoints[0])
                    conn = BrokerConnection(ep.host, ep.port, f"broker-{self.broker_id}-shutdown",
                                            security=self.inter_broker_security)
                    try:
                        await conn.connect(timeout_s=5)
                        response = await conn.send(
                            control.ControlledShutdownRequest(broker_id=self.broker_id, broker_epoch=self.broker_epoch),
                            control.ControlledShutdownResponse, timeout_s=30)
                    finally:
                        await conn.close()
                    if response.error_code == ErrorCode.none and not response.remaining_partitions:
                        log.info("Controlled shutdown succeeded")
                        return
                    log.info("Controlled shutdown attempt %d: error %s, %d partitions still led here",
                             attempt + 1, ErrorCode(response.error_code).name, len(response.remaining_partitions))
            if attempt < retries:
                await asyncio.sleep(backoff_s)
        log.warning("Controlled shutdown did not complete after %d attempts", retries + 1)


def _halt(reason: str) -> None:
    """Kafka's Exit.halt(1) when no log directory is left: nothing could be served."""
    log.critical(reason)
    logging.shutdown()
    os._exit(1)


async def _bounded(step: str, awaitable: Any, timeout_s: float) -> None:
    started = asyncio.get_running_loop().time()
    try:
        await asyncio.wait_for(awaitable, timeout_s)
    except TimeoutError:
        log.warning("Shutdown step '%s' did not finish within %.0fs; continuing", step, timeout_s)
    except Exception:
        log.warning("Shutdown step '%s' failed; continuing", step, exc_info=True)
    else:
        elapsed = asyncio.get_running_loop().time() - started
        if elapsed > 2:
            log.info("Shutdown step '%s' took %.1fs", step, elapsed)


class UnsupportedVersion(Exception):
    """An api key or version outside the handler table: the connection is closed, as Kafka does."""
