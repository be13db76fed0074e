"""TLS for one server-side connection, sans-IO: Kafka's ``SslTransportLayer`` as an
``ssl.SSLObject`` over memory buffers.  Ciphertext read from the socket goes into
:meth:`SslTransportLayer.get_buffer`; the handshake, then plaintext, come out of it; what the
socket must send (handshake records, alerts, encrypted answers) is :meth:`data_to_send`.

Doing TLS here rather than in the event loop's transport keeps a failed handshake one line in
the broker's log and the end of that connection, and lets the socket server encrypt file
regions it reads (TLS never uses ``sendfile``).
"""

from __future__ import annotations

import ssl
from typing import Final

from odradek.security.acls import KafkaPrincipal
from odradek.security.tls import peer_principal

__all__ = ["HANDSHAKE_ERRORS", "SslTransportLayer"]

_READ_BYTES: Final = 64 * 1024

# What a failed handshake raises.
HANDSHAKE_ERRORS: Final = (ssl.SSLError, OSError, ValueError)


class SslTransportLayer:
    """One connection's TLS session, server side."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._buffer = bytearray(_READ_BYTES)
        self.ready = False  # the handshake is done

    def get_buffer(self) -> memoryview:
        """Where the next ciphertext from the socket should be read to."""
        return memoryview(self._buffer)

    def buffer_updated(self, nbytes: int) -> bool:
        """``nbytes`` of ciphertext arrived; returns True when they completed the handshake.
        Raises one of :data:`HANDSHAKE_ERRORS` when the handshake fails (its alert is then in
        :meth:`data_to_send`, so the client learns why)."""
        self._incoming.write(memoryview(self._buffer)[:nbytes])
        if self.ready:
            return False
        try:
            self._ssl.do_handshake()
        except ssl.SSLWantReadError:
            return False
        self.ready = True
        return True

    def read_into(self, buffer: memoryview) -> int:
        """Decrypt into ``buffer``: the bytes written, 0 when the peer closed the session
        (close_notify), -1 while more ciphertext is needed.  Raises ``ssl.SSLError``."""
        try:
            return self._ssl.read(len(buffer), buffer)
        except ssl.SSLWantReadError:
            return -1
        except ssl.SSLZeroReturnError:
            return 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt ``data`` into :meth:`data_to_send`.  Raises ``ssl.SSLError``."""
        self._ssl.write(data)

    def data_to_send(self) -> bytes:
        """Ciphertext for the socket (empty when there is none)."""
        return self._outgoing.read()

    def principal(self, mapping_rules: str) -> KafkaPrincipal:
        """The client certificate's principal (``ssl.principal.mapping.rules``); ValueError
        when there is none to map."""
        return peer_principal(self._ssl, mapping_rules)

    def close(self) -> None:
        """Our close_notify, into :meth:`data_to_send` (nothing when the handshake never ended)."""
        if not self.ready:
            return
        try:
            self._ssl.unwrap()
        except (ssl.SSLError, OSError, ValueError):
            pass
