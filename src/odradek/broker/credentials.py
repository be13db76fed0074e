"""The broker's SCRAM credential cache (Kafka's ``CredentialCache`` behind ``CredentialProvider``).

Credentials live in ZooKeeper under ``/config/users/<user>`` as ``SCRAM-SHA-256`` /
``SCRAM-SHA-512`` entries in ``ScramCredentialUtils`` form.  The dynamic config manager reads
them all at start-up and re-reads one user on each ``users/<user>`` change notification
(Kafka's UserConfigHandler), handing the config to :meth:`CredentialCache.update`; SASL
exchanges look credentials up here without I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from odradek.security.scram import MECHANISMS, ScramCredential

log = logging.getLogger(__name__)

__all__ = ["CredentialCache"]


class CredentialCache:
    def __init__(self) -> None:
        self._credentials: dict[str, dict[str, ScramCredential]] = {m: {} for m in MECHANISMS}

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        """The user's credential for ``mechanism``, or None."""
        return self._credentials.get(mechanism, {}).get(user)

    def update(self, user: str, config: Mapping[str, str]) -> None:
        """Replace the user's credentials with those in its ``/config/users`` entry; a
        mechanism missing from it (or unparseable) has none afterwards."""
        for mechanism, by_user in self._credentials.items():
            text = config.get(mechanism)
            credential = None
            if text is not None:
                try:
                    credential = ScramCredential.from_string(text)
                except ValueError as e:
                    log.error("Ignoring the %s credential of user %s in ZooKeeper: %s", mechanism, user, e)
            if credential is None:
                by_user.pop(user, None)
            else:
                by_user[user] = credential

    def users(self, mechanism: str) -> list[str]:
        return sorted(self._credentials.get(mechanism, {}))
