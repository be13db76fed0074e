"""Request handlers, one module per API family, routed by api key.

Each handler is registered with the versions it implements; ApiVersions answers from this
table, so what the broker advertises is exactly what it implements.
"""

from __future__ import annotations

import importlib

from odradek.broker.apis.registry import REGISTRY, ApiSpec, api

__all__ = ["REGISTRY", "ApiSpec", "api", "load_handlers"]

_MODULES = ("api_versions", "control", "metadata", "produce", "fetch", "offsets", "alter_partition",
            "init_producer_id", "admin_topics", "admin_configs", "describe_cluster", "groups", "offsets_commit",
            "txn_offset_commit", "transactions", "txn_markers", "describe_producers", "sasl", "acls",
            "scram_credentials", "log_dirs", "client_quotas")


def load_handlers() -> dict[int, ApiSpec]:
    """Import every handler module (each registers itself) and return the table."""
    for name in _MODULES:
        importlib.import_module(f"odradek.broker.apis.{name}")
    return REGISTRY
