"""What a suite gets besides its cluster: a scratch directory, the JVM launcher, and the
client settings of the cluster's variant."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compat.jvm import Jvm
from compat.suite import Variant
from odradek.local.cluster import ADMIN_PROPERTIES, USER_PROPERTIES, LocalCluster
from odradek.local.security import ADMIN, CLIENT_USER

__all__ = ["SuiteContext"]


@dataclass
class SuiteContext:
    suite: str
    variant: Variant
    workdir: Path  # this run's own files (the cluster lives in workdir/cluster)
    cluster: LocalCluster
    jvm: Jvm

    @property
    def secured(self) -> bool:
        return self.cluster.security is not None

    def command_config(self, user: str = ADMIN) -> Path | None:
        """The Java client properties file of ``user`` (admin: the super-user; ``client``: the
        unprivileged user), as ``--command-config`` takes it; None on a PLAINTEXT cluster."""
        if not self.secured:
            return None
        name = {ADMIN: ADMIN_PROPERTIES, CLIENT_USER: USER_PROPERTIES}[user]
        return self.cluster.dir / name

    def path(self, name: str) -> Path:
        """A file in this run's scratch directory."""
        return self.workdir / name
