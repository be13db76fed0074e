"""SCRAM-SHA-256/512 without I/O: Kafka's stored credentials and the server side of the exchange.

* :class:`ScramCredential` is Kafka's ``ScramCredential`` (salt, stored key, server key,
  iterations) computed as in RFC 5802 section 3, with the string form that Kafka's
  ``ScramCredentialUtils.credentialToString`` writes under ``/config/users/<user>``.
* :class:`ScramServer` follows Kafka's ``ScramSaslServer``: client-first-message in,
  server-first-message out, client-final-message in, server-final-message out.
* :class:`ScramClient` is a small client (Kafka's ``ScramSaslClient``), used by tests.

Not wired into the broker yet.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from odradek.protocol.errors import for_code

# Kafka's ScramMechanism: both mechanisms accept 4096..16384 iterations.
MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
# The only SCRAM extension Kafka accepts (delegation tokens, ScramLoginModule.TOKEN_AUTH_CONFIG).
SUPPORTED_EXTENSIONS = frozenset({"tokenauth"})

INVALID_CREDENTIALS = "Authentication failed: Invalid user credentials"


class ScramAuthenticationError(for_code(ErrorCode.sasl_authentication_failed)):  # type: ignore[misc]
    """A failed SCRAM exchange (Kafka: SaslAuthenticationException, SASL_AUTHENTICATION_FAILED)."""


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ValueError(f"Unsupported SCRAM mechanism {mechanism!r}") from None


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802 ``Hi(Normalize(password), salt, i)``, i.e. PBKDF2-HMAC (no SASLprep, as Kafka)."""
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode(), salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ValueError(f"Invalid base64 {what}: {text!r}") from None


def check_iterations(mechanism: str, iterations: int) -> None:
    """Kafka's ScramMechanism.minIterations/maxIterations bounds."""
    _hash_name(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(
            f"Iterations {iterations} is out of range for {mechanism}: "
            f"must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}"
        )


@dataclass(frozen=True)
class ScramCredential:
    """Kafka's ``ScramCredential``: what the server stores instead of the password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_password(
        cls,
        mechanism: str,
        password: str,
        iterations: int = MIN_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        """Kafka's ``ScramFormatter.generateCredential``: RFC 5802 StoredKey and ServerKey."""
        check_iterations(mechanism, iterations)
        if salt is None:
            salt = secrets.token_bytes(32)
        return cls.from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                        iterations)

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
        """The credential of an already salted password (AlterUserScramCredentials sends that,
        never the password; Kafka's ScramFormatter.generateCredential(salt, saltedPassword, ...))."""
        hash_name = _hash_name(mechanism)
        client_key = _hmac(hash_name, salted, b"Client Key")
        return cls(
            salt=salt,
            stored_key=hashlib.new(hash_name, client_key).digest(),
            server_key=_hmac(hash_name, salted, b"Server Key"),
            iterations=iterations,
        )

    def to_string(self) -> str:
        """``ScramCredentialUtils.credentialToString``: the value in ``/config/users/<user>``."""
        return (
            f"salt={_b64(self.salt)},stored_key={_b64(self.stored_key)},"
            f"server_key={_b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def from_string(cls, text: str) -> ScramCredential:
        """``ScramCredentialUtils.credentialFromString``; a ValueError names what is wrong."""
        fields: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key:
                raise ValueError(
                    f"Invalid SCRAM credential {text!r}: field {part!r} is not key=value"
                )
            if key in fields:
                raise ValueError(f"Invalid SCRAM credential {text!r}: duplicate field {key!r}")
            fields[key] = value
        expected = {"salt", "stored_key", "server_key", "iterations"}
        if set(fields) != expected:
            raise ValueError(
                f"Invalid SCRAM credential {text!r}: expected fields {sorted(expected)}, "
                f"got {sorted(fields)}"
            )
        if not re.fullmatch(r"[0-9]+", fields["iterations"]):
            raise ValueError(f"Invalid SCRAM credential {text!r}: iterations is not a number")
        return cls(
            salt=_unb64(fields["salt"], "salt"),
            stored_key=_unb64(fields["stored_key"], "stored_key"),
            server_key=_unb64(fields["server_key"], "server_key"),
            iterations=int(fields["iterations"]),
        )


def escape_username(name: str) -> str:
    """RFC 5802 saslname: ``=`` becomes ``=3D`` and ``,`` becomes ``=2C``."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(saslname: str) -> str:
    """The inverse of :func:`escape_username`; any other ``=`` sequence is a ValueError."""
    if re.search(r"=(?!2C|3D)", saslname):
        raise ValueError(f"Invalid username {saslname!r}: bad '=' escape")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _new_nonce() -> str:
    # Kafka's ScramFormatter.secureRandomString: printable, no commas.
    return secrets.token_urlsafe(24)


_VALUE = r"[\x21-\x2b\x2d-\x7e]+"  # printable, no comma (RFC 5802 "printable")
_CLIENT_FIRST = re.compile(
    r"n,(?:a=(?P<authzid>[^,]*))?,n=(?P<saslname>[^,]+),r=(?P<nonce>" + _VALUE + r")"
    r"(?P<extensions>(?:,[^,]+)*)"
)
_CLIENT_FINAL = re.compile(
    r"c=(?P<channel>[^,]*),r=(?P<nonce>"
    + _VALUE
    + r")(?P<extensions>(?:,[^,]+)*?),p=(?P<proof>[^,]+)"
)


def _parse_extensions(text: str) -> dict[str, str]:
    extensions: dict[str, str] = {}
    for part in filter(None, text.split(",")):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ValueError(f"Invalid SCRAM extension {part!r}")
        extensions[key] = value
    return extensions


#: Looks up a user's credential for a mechanism; None when the user has none.
CredentialLookup = Callable[[str], "ScramCredential | None"]


class ScramServer:
    """Kafka's ``ScramSaslServer`` as a sans-IO state machine.

    Call :meth:`evaluate` with each client message; it returns the server's reply.

    A user without a credential fails as in Kafka 2.8: at the client-first-message, with the
    same "Invalid user credentials" message as a wrong password.  With ``hide_unknown_users``
    a stable fake credential is used instead, so the exchange proceeds and fails only on the
    proof (RFC 5802 section 9 suggestion; not Kafka's behaviour).

    The ``tokenauth`` extension is accepted (Kafka's ScramExtensions) but odradek has no
    delegation tokens, so ``tokenauth=true`` is treated as a user without a credential.
    """

    def __init__(
        self,
        mechanism: str,
        lookup: CredentialLookup,
        *,
        nonce: Callable[[], str] = _new_nonce,
        hide_unknown_users: bool = False,
        fake_secret: bytes | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._lookup = lookup
        self._nonce = nonce
        self._hide_unknown_users = hide_unknown_users
        self._fake_secret = fake_secret if fake_secret is not None else secrets.token_bytes(32)
        self._state = "receive_client_first"
        self._credential: ScramCredential | None = None
        self._user_known = False
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._combined_nonce = ""
        self._client_nonce = ""
        self.username: str | None = None
        self.extensions: dict[str, str] = {}

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, response: bytes) -> bytes:
        """Kafka's ``ScramSaslServer.evaluateResponse``."""
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            self._state = "failed"
            raise ScramAuthenticationError("Invalid SCRAM message: not UTF-8") from None
        if self._state == "receive_client_first":
            return self._client_first(text)
        if self._state == "receive_client_final":
            return self._client_final(text)
        raise ScramAuthenticationError(f"Unexpected SCRAM message in state {self._state}")

    def _fail(self, message: str) -> ScramAuthenticationError:
        self._state = "failed"
        return ScramAuthenticationError(message)

    def _fake_credential(self, username: str) -> ScramCredential:
        # Stable per user for this server so that repeated attempts see the same salt.
        digest = _hmac(self._hash, self._fake_secret, username.encode())
        return ScramCredential(
            salt=digest[:32], stored_key=digest, server_key=digest, iterations=MIN_ITERATIONS
        )

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise self._fail(f"Invalid SCRAM client first message: {text!r}")
        try:
            username = unescape_username(match["saslname"])
            authzid = unescape_username(match["authzid"] or "")
            extensions = _parse_extensions(match["extensions"])
        except ValueError as e:
            raise self._fail(f"Invalid SCRAM client first message: {e}") from None
        unsupported = set(extensions) - SUPPORTED_EXTENSIONS
        if unsupported:
            raise self._fail(f"Unsupported extensions will not be processed: {sorted(unsupported)}")
        if authzid and authzid != username:
            raise self._fail(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.username = username
        self.extensions = extensions
        token_auth = extensions.get("tokenauth", "").lower() == "true"
        credential = None if token_auth else self._lookup(username)
        self._user_known = credential is not None
        if credential is None and not self._hide_unknown_users:
            raise self._fail(INVALID_CREDENTIALS)
        if credential is not None and credential.iterations < MIN_ITERATIONS:
            raise self._fail(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                f"for {self.mechanism}"
            )
        self._credential = credential if credential is not None else self._fake_credential(username)
        self._gs2_header = text[: match.start("saslname") - 2]
        self._client_first_bare = text[len(self._gs2_header) :]
        self._client_nonce = match["nonce"]
        self._combined_nonce = match["nonce"] + self._nonce()
        self._server_first = f"r={self._combined_nonce},s={_b64(self._credential.salt)},i={self._credential.iterations}"
        self._state = "receive_client_final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise self._fail(f"Invalid SCRAM client final message: {text!r}")
        # librdkafka before 2.6.1 (kcat 1.7 among them) sends its own nonce again in front of
        # the combined one (confluentinc/librdkafka#4895); Kafka before 3.8.1 did not check the
        # nonce at all, so those clients worked.  Accept exactly that form, nothing looser.
        if match["nonce"] not in (self._combined_nonce, self._client_nonce + self._combined_nonce):
            raise self._fail("Invalid client nonce in the final client message.")
        if match["channel"] != _b64(self._gs2_header.encode()):
            raise self._fail("Invalid channel binding in the final client message.")
        try:
            proof = _unb64(match["proof"], "proof")
        except ValueError as e:
            raise self._fail(f"Invalid SCRAM client final message: {e}") from None
        assert self._credential is not None
        without_proof = text[: match.start("proof") - 3]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(self._hash, self._credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise self._fail(INVALID_CREDENTIALS)
        client_key = _xor(proof, client_signature)
        computed = hashlib.new(self._hash, client_key).digest()
        if not self._user_known or not hmac.compare_digest(computed, self._credential.stored_key):
            raise self._fail(INVALID_CREDENTIALS)
        server_signature = _hmac(self._hash, self._credential.server_key, auth_message)
        self._state = "complete"
        return f"v={_b64(server_signature)}".encode()


class ScramClient:
    """A minimal SCRAM client (after Kafka's ``ScramSaslClient``), used to drive :class:`ScramServer`."""

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        *,
        nonce: str | None = None,
        authzid: str = "",
        extensions: dict[str, str] | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._password = password
        self._nonce = nonce if nonce is not None else _new_nonce()
        self._gs2_header = f"n,{'a=' + escape_username(authzid) if authzid else ''},"
        ext = "".join(f",{k}={v}" for k, v in (extensions or {}).items())
        self._client_first_bare = f"n={escape_username(username)},r={self._nonce}{ext}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return (self._gs2_header + self._client_first_bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        """Answer the server-first-message with the client proof."""
        text = server_first.decode()
        match = re.fullmatch(r"r=(?P<nonce>[^,]+),s=(?P<salt>[^,]+),i=(?P<i>[0-9]+)(?:,.*)?", text)
        if match is None or not match["nonce"].startswith(self._nonce):
            raise ScramAuthenticationError(f"Invalid SCRAM server first message: {text!r}")
        salted = salted_password(
            self.mechanism, self._password, _unb64(match["salt"], "salt"), int(match["i"])
        )
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={_b64(self._gs2_header.encode())},r={match['nonce']}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        proof = _xor(client_key, _hmac(self._hash, stored_key, auth_message))
        server_key = _hmac(self._hash, salted, b"Server Key")
        self._server_signature = _hmac(self._hash, server_key, auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """Check the server's signature ``v=``; raise if it is wrong or an ``e=`` error."""
        text = server_final.decode()
        if not text.startswith("v=") or not hmac.compare_digest(
            _unb64(text[2:], "server signature"), self._server_signature
        ):
            raise ScramAuthenticationError(
                f"Invalid server signature in server final message: {text!r}"
            )
