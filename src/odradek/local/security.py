"""Security for a local cluster (``odradek up --security``): certificates, users, listener
configs and the client settings to reach it.

A secure local cluster has two listeners per broker, both of the chosen protocol: CLIENT
(what ``bootstrap_servers`` names) and BROKER (inter-broker traffic).  The ACL authorizer is
on and nobody is allowed anything without an ACL, except the super-users:

* ``admin`` (``User:admin``): the cluster's administrator, also the brokers' own login on SASL.
* ``client`` (``User:client``): an ordinary user with no rights until ACLs grant them.
* on SSL, each broker's certificate principal (``User:broker-<id>``) too.

SASL logins use SCRAM-SHA-512 (PLAIN is enabled as well, users in the JAAS config); the SCRAM
credentials are written to ZooKeeper before the brokers start, as ``kafka-configs.sh
--zookeeper`` does in Kafka's documentation.  On SSL the principal is the certificate's CN
(``ssl.principal.mapping.rules``), and clients must present a certificate.

Everything lands in ``<dir>/security/``: ``ca.pem`` (the truststore), one key+chain PEM per
broker, and per user a key+chain PEM plus separate certificate and key files (librdkafka).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from odradek.security.certs import CertificateAuthority
from odradek.security.protocols import SecurityProtocolSettings
from odradek.security.scram import ScramCredential

__all__ = ["ADMIN", "CLIENT_USER", "PROTOCOLS", "LocalSecurity", "UserLogin", "properties_text"]

PROTOCOLS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL")
ADMIN = "admin"
CLIENT_USER = "client"
MECHANISM = "SCRAM-SHA-512"
CLIENT_LISTENER = "CLIENT"
BROKER_LISTENER = "BROKER"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
# User:<CN> for certificates (Kafka's default would be the whole DN, "CN=admin,O=odradek").
_MAPPING_RULES = "RULE:^CN=([^,]+)(,.*)?$/$1/,DEFAULT"


def _jaas(module: str, username: str, password: str, **users: str) -> str:
    options = " ".join(f'{k}="{v}"' for k, v in {"username": username, "password": password, **users}.items())
    return f"{module} required {options};"


@dataclass(frozen=True)
class UserLogin:
    """One user's credentials and files."""

    name: str
    password: str
    keystore: Path | None = None  # key + chain (Java ssl.keystore.type=PEM); SSL only
    cert: Path | None = None
    key: Path | None = None


@dataclass
class LocalSecurity(SecurityProtocolSettings):
    """The secrets and settings of one secure local cluster; ``create`` makes them."""

    protocol: str
    directory: Path
    ca_file: Path
    broker_keystores: dict[int, Path]
    users: dict[str, UserLogin] = field(default_factory=dict)

    @classmethod
    def create(cls, protocol: str, directory: Path, broker_ids: list[int]) -> LocalSecurity:
        """New CA, broker certificates and user passwords under ``directory``."""
        protocol = cls.check_protocol(protocol)
        directory.mkdir(parents=True, exist_ok=True)
        ca = CertificateAuthority.create("odradek-local-ca")
        ca_file = ca.write_truststore_pem(directory / "ca.pem")
        keystores = {b: ca.issue(f"broker-{b}").write_keystore_pem(directory / f"broker-{b}.pem") for b in broker_ids}
        users = {}
        for name in (ADMIN, CLIENT_USER):
            password = secrets.token_urlsafe(18)
            if protocol == "SSL":
                issued = ca.issue(name, hosts=())
                users[name] = UserLogin(name, password, issued.write_keystore_pem(directory / f"{name}.pem"),
                                        issued.write_cert_pem(directory / f"{name}.crt"),
                                        issued.write_key_pem(directory / f"{name}.key"))
            else:
                users[name] = UserLogin(name, password)
        return cls(protocol, directory, ca_file, keystores, users)

    @staticmethod
    def check_protocol(protocol: str) -> str:
        """The protocol upper-cased; ValueError (one line) for anything but the three."""
        if protocol.upper() not in PROTOCOLS:
            raise ValueError(f"security must be one of {', '.join(p.lower() for p in PROTOCOLS)}, got {protocol!r}")
        return protocol.upper()

    def super_users(self) -> list[str]:
        names = [f"User:{ADMIN}"]
        if self.protocol == "SSL":
            names += [f"User:broker-{b}" for b in self.broker_keystores]
        return names

    def scram_configs(self) -> dict[str, dict[str, str]]:
        """``/config/users/<user>`` contents: each user's SCRAM-SHA-512 and -256 credentials."""
        if not self.uses_sasl:
            return {}
        return {u.name: {m: ScramCredential.from_password(m, u.password).to_string()
                         for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
                for u in self.users.values()}

    def broker_properties(self, broker_id: int, client_port: int, broker_port: int) -> dict[str, str]:
        """The listener, TLS, SASL and authorizer keys of one broker's server.properties."""
        protocol = self.protocol
        props = {
            "listeners": f"{CLIENT_LISTENER}://127.0.0.1:{client_port},{BROKER_LISTENER}://127.0.0.1:{broker_port}",
            "advertised.listeners": f"{CLIENT_LISTENER}://127.0.0.1:{client_port},"
                                    f"{BROKER_LISTENER}://127.0.0.1:{broker_port}",
            "listener.security.protocol.map": f"{CLIENT_LISTENER}:{protocol},{BROKER_LISTENER}:{protocol}",
            "inter.broker.listener.name": BROKER_LISTENER,
            "authorizer.class.name": AUTHORIZER,
            "super.users": ";".join(self.super_users()),
            "allow.everyone.if.no.acl.found": "false",
        }
        if self.uses_tls:
            props.update({
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.broker_keystores[broker_id]),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.ca_file),
                "ssl.client.auth": "required" if protocol == "SSL" else "none",
                "ssl.principal.mapping.rules": _MAPPING_RULES,
            })
        if self.uses_sasl:
            admin = self.users[ADMIN]
            client = self.users[CLIENT_USER]
            scram = _jaas(_SCRAM_MODULE, admin.name, admin.password)
            plain_users = {f"user_{u.name}": u.password for u in (admin, client)}
            plain = _jaas(_PLAIN_MODULE, admin.name, admin.password, **plain_users)
            props.update({"sasl.enabled.mechanisms": f"{MECHANISM},PLAIN",
                          "sasl.mechanism.inter.broker.protocol": MECHANISM})
            for listener in (CLIENT_LISTENER.lower(), BROKER_LISTENER.lower()):
                props[f"listener.name.{listener}.{MECHANISM.lower()}.sasl.jaas.config"] = scram
                props[f"listener.name.{listener}.plain.sasl.jaas.config"] = plain
        return props

    def java_properties(self, user: str = ADMIN) -> dict[str, str]:
        """Kafka (Java-style) client properties for ``user``: ``--command-config`` files."""
        login = self.users[user]
        props = {"security.protocol": self.protocol}
        if self.uses_sasl:
            props["sasl.mechanism"] = MECHANISM
            props["sasl.jaas.config"] = _jaas(_SCRAM_MODULE, login.name, login.password)
        if self.uses_tls:
            props["ssl.truststore.type"] = "PEM"
            props["ssl.truststore.location"] = str(self.ca_file)
        if self.protocol == "SSL":
            props["ssl.keystore.type"] = "PEM"
            props["ssl.keystore.location"] = str(login.keystore)
        return props

    def librdkafka_properties(self, user: str = ADMIN) -> dict[str, str]:
        """The same in librdkafka's names (confluent-kafka, kcat ``-X``)."""
        login = self.users[user]
        props = {"security.protocol": self.protocol}
        if self.uses_sasl:
            props.update({"sasl.mechanism": MECHANISM, "sasl.username": login.name, "sasl.password": login.password})
        if self.uses_tls:
            props["ssl.ca.location"] = str(self.ca_file)
        if self.protocol == "SSL":
            props["ssl.certificate.location"] = str(login.cert)
            props["ssl.key.location"] = str(login.key)
        return props


def properties_text(props: dict[str, str], comment: str) -> str:
    """A Java .properties file (values here need no escaping but backslashes)."""
    lines = [f"# {comment}"] + [f"{k}={v.replace(chr(92), chr(92) * 2)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"
