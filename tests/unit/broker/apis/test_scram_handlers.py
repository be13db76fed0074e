"""DescribeUserScramCredentials and AlterUserScramCredentials handlers on a FakeBroker: credentials
written to and read from ``/config/users``, and the refusals (not the controller, no Alter or
Describe on the cluster, invalid, duplicated and missing credentials)."""

from __future__ import annotations

from fake_broker import FakeBroker, WithBroker
from kio.schema.alter_user_scram_credentials.v0 import request as alter_req
from kio.schema.alter_user_scram_credentials.v0 import response as alter_resp
from kio.schema.describe_user_scram_credentials.v0 import request as describe_req
from kio.schema.describe_user_scram_credentials.v0 import response as describe_resp
from kio.static.primitive import i8, i32

from odradek.broker.apis.scram_credentials import MECHANISM_CODES, USERS
from odradek.protocol.errors import ErrorCode as E
from odradek.security.acls import KafkaPrincipal, Operation, ResourceType
from odradek.security.scram import ScramCredential

ADMIN = KafkaPrincipal("User", "admin")
ALICE = KafkaPrincipal("User", "alice")
SHA256, SHA512 = MECHANISM_CODES["SCRAM-SHA-256"], MECHANISM_CODES["SCRAM-SHA-512"]


def upsert(user: str, mechanism: int = SHA256, iterations: int = 4096) -> alter_req.ScramCredentialUpsertion:
    return alter_req.ScramCredentialUpsertion(name=user, mechanism=i8(mechanism), iterations=i32(iterations),
                                              salt=b"salt", salted_password=b"p" * 32)


def remove(user: str, mechanism: int = SHA256) -> alter_req.ScramCredentialDeletion:
    return alter_req.ScramCredentialDeletion(name=user, mechanism=i8(mechanism))


async def alter(b: FakeBroker, upsertions: tuple[alter_req.ScramCredentialUpsertion, ...] = (),
                deletions: tuple[alter_req.ScramCredentialDeletion, ...] = (), principal: KafkaPrincipal = ADMIN
                ) -> dict[str, E]:
    response = await b.call(alter_req.AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions),
                            alter_resp.AlterUserScramCredentialsResponse, principal=principal)
    return {r.user: r.error_code for r in response.results}


async def describe(b: FakeBroker, *users: str, principal: KafkaPrincipal = ADMIN
                   ) -> tuple[E, dict[str, tuple[E, list[tuple[int, int]]]]]:
    request = describe_req.DescribeUserScramCredentialsRequest(
        users=tuple(describe_req.UserName(name=u) for u in users) or None)
    response = await b.call(request, describe_resp.DescribeUserScramCredentialsResponse, principal=principal)
    return response.error_code, {r.user: (r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
                                 for r in response.results}


def test_credentials_are_written_described_and_deleted(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        assert await alter(b, (upsert("alice"), upsert("alice", SHA512, 8192), upsert("bob"))) == {
            "alice": E.none, "bob": E.none}
        stored = b.zk.configs[(USERS, "alice")]
        assert ScramCredential.from_string(stored["SCRAM-SHA-512"]).iterations == 8192
        assert await describe(b) == (E.none, {"alice": (E.none, [(SHA256, 4096), (SHA512, 8192)]),
                                              "bob": (E.none, [(SHA256, 4096)])})
        assert await alter(b, deletions=(remove("alice"),)) == {"alice": E.none}
        assert await describe(b, "alice", "carol") == (E.none, {
            "alice": (E.none, [(SHA512, 8192)]), "carol": (E.resource_not_found, [])})

    with_broker(body)


def test_invalid_duplicated_and_missing_credentials_refuse_their_user_only(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        assert await alter(b, (upsert(""), upsert("few", iterations=100), upsert("many", iterations=20000),
                               upsert("odd", mechanism=9), upsert("twice"), upsert("twice"), upsert("fine")),
                           (remove("ghost"),)) == {
            "": E.unacceptable_credential, "few": E.unacceptable_credential, "many": E.unacceptable_credential,
            "odd": E.unsupported_sasl_mechanism, "twice": E.duplicate_resource, "ghost": E.resource_not_found,
            "fine": E.none}
        assert set(await b.zk.get_children("/config/users") or []) == {"fine"}
        error, results = await describe(b, "fine", "fine", "")
        assert (error, results) == (E.none, {"": (E.resource_not_found, []), "fine": (E.duplicate_resource, [])})

    with_broker(body)


def test_only_the_active_controller_alters_and_the_cluster_acls_apply(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        b.enable_authorizer(ADMIN)
        assert await alter(b, (upsert("alice"),), principal=ALICE) == {"alice": E.cluster_authorization_failed}
        assert (await describe(b, principal=ALICE))[0] == E.cluster_authorization_failed
        b.allow(ALICE, Operation.DESCRIBE, ResourceType.CLUSTER)
        assert await describe(b, principal=ALICE) == (E.none, {})
        b.controller.is_active = False
        assert await alter(b, (upsert("alice"),)) == {"alice": E.not_controller}
        assert b.zk.configs == {}

    with_broker(body)
