"""DescribeClientQuotas and AlterClientQuotas on a FakeBroker: quotas written to and read from
the users/ and clients/ config entities (beside SCRAM credentials), the filters' matching, and
the refusals (no AlterConfigs or DescribeConfigs on the cluster, invalid entities, keys and
values, malformed filters)."""

from __future__ import annotations

import pytest
from fake_broker import FakeBroker, WithBroker
from kio.schema.alter_client_quotas.v0 import request as alter_v0
from kio.schema.alter_client_quotas.v0 import response as alter_v0_resp
from kio.schema.alter_client_quotas.v1 import request as alter_req
from kio.schema.alter_client_quotas.v1 import response as alter_resp
from kio.schema.describe_client_quotas.v0 import request as describe_v0
from kio.schema.describe_client_quotas.v0 import response as describe_v0_resp
from kio.schema.describe_client_quotas.v1 import request as describe_req
from kio.schema.describe_client_quotas.v1 import response as describe_resp
from kio.static.primitive import f64, i8

from odradek.protocol.errors import ErrorCode as E
from odradek.security.acls import KafkaPrincipal, Operation, ResourceType

ADMIN = KafkaPrincipal("User", "admin")
ALICE = KafkaPrincipal("User", "alice")
EXACT, DEFAULT, ANY = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]


def op(key: str, value: float | None) -> alter_req.OpData:
    return alter_req.OpData(key=key, value=f64(float(value if value is not None else 0.0)), remove=value is None)


async def alter(b: FakeBroker, *entries: tuple[Entity, tuple[alter_req.OpData, ...]], validate_only: bool = False,
                principal: KafkaPrincipal = ADMIN) -> list[tuple[E, str | None, Entity]]:
    request = alter_req.AlterClientQuotasRequest(validate_only=validate_only, entries=tuple(
        alter_req.EntryData(entity=tuple(alter_req.EntityData(entity_type=t, entity_name=n) for t, n in entity),
                            ops=ops) for entity, ops in entries))
    response = await b.call(request, alter_resp.AlterClientQuotasResponse, principal=principal)
    return [(e.error_code, e.error_message, tuple((x.entity_type, x.entity_name) for x in e.entity))
            for e in response.entries]


async def describe(b: FakeBroker, *components: tuple[str, int, str | None], strict: bool = False,
                   principal: KafkaPrincipal = ADMIN) -> tuple[E, str | None, dict[Entity, dict[str, float]] | None]:
    request = describe_req.DescribeClientQuotasRequest(strict=strict, components=tuple(
        describe_req.ComponentData(entity_type=t, match_type=i8(m), match=n) for t, m, n in components))
    response = await b.call(request, describe_resp.DescribeClientQuotasResponse, principal=principal)
    entries = None if response.entries is None else {
        tuple((x.entity_type, x.entity_name) for x in e.entity): {v.key: v.value for v in e.values}
        for e in response.entries}
    return response.error_code, response.error_message, entries


async def setup_quotas(b: FakeBroker) -> None:
    assert await alter(
        b,
        ((("user", "alice"),), (op("producer_byte_rate", 1024),)),
        ((("user", None),), (op("consumer_byte_rate", 5000),)),
        ((("user", "alice"), ("client-id", "app")), (op("request_percentage", 50),)),
        ((("client-id", "app"),), (op("producer_byte_rate", 10485760), op("request_percentage", 12.5))),
        ((("client-id", None),), (op("producer_byte_rate", 1e6),)),
    ) == [(E.none, None, e) for e in (
        (("user", "alice"),), (("user", None),), (("user", "alice"), ("client-id", "app")),
        (("client-id", "app"),), (("client-id", None),))]


ALL = {
    (("user", "alice"),): {"producer_byte_rate": 1024.0},
    (("user", None),): {"consumer_byte_rate": 5000.0},
    (("user", "alice"), ("client-id", "app")): {"request_percentage": 50.0},
    (("client-id", "app"),): {"producer_byte_rate": 10485760.0, "request_percentage": 12.5},
    (("client-id", None),): {"producer_byte_rate": 1e6},
}


def test_quotas_are_stored_as_kafka_stores_them(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await setup_quotas(b)
        assert b.zk.configs == {
            ("users", "alice"): {"producer_byte_rate": "1024"},
            ("users", "<default>"): {"consumer_byte_rate": "5000"},
            ("users", "alice/clients/app"): {"request_percentage": "50.0"},
            ("clients", "app"): {"producer_byte_rate": "10485760", "request_percentage": "12.5"},
            ("clients", "<default>"): {"producer_byte_rate": "1000000"},
        }
        # Removing a key leaves the others; SCRAM credentials beside quotas are kept and not shown.
        b.zk.configs[("users", "alice")]["SCRAM-SHA-256"] = "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096"
        assert await alter(b, ((("user", "alice"),), (op("producer_byte_rate", None), op("consumer_byte_rate", 7)))) \
            == [(E.none, None, (("user", "alice"),))]
        assert b.zk.configs[("users", "alice")] == {
            "SCRAM-SHA-256": "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096", "consumer_byte_rate": "7"}
        assert (await describe(b, ("user", EXACT, "alice"), strict=True))[2] == {
            (("user", "alice"),): {"consumer_byte_rate": 7.0}}
    with_broker(body)


@pytest.mark.parametrize(("components", "strict", "expected"), [
    ((), False, list(ALL)),
    ((), True, []),
    ((("user", EXACT, "alice"),), False, [(("user", "alice"),), (("user", "alice"), ("client-id", "app"))]),
    ((("user", EXACT, "alice"),), True, [(("user", "alice"),)]),
    ((("user", DEFAULT, None),), False, [(("user", None),)]),
    ((("user", ANY, None),), True, [(("user", "alice"),), (("user", None),)]),
    ((("client-id", ANY, None),), True, [(("client-id", "app"),), (("client-id", None),)]),
    ((("user", ANY, None), ("client-id", ANY, None)), True, [(("user", "alice"), ("client-id", "app"))]),
    ((("client-id", EXACT, "app"),), False, [(("user", "alice"), ("client-id", "app")), (("client-id", "app"),)]),
    ((("client-id", EXACT, "<default>"),), False, []),  # a client id named <default> is not the default
    ((("user", EXACT, "nobody"),), False, []),
    ((("ip", ANY, None),), False, []),
])
def test_filters_select_as_kafkas_do(with_broker: WithBroker, components: tuple[tuple[str, int, str | None], ...],
                                     strict: bool, expected: list[Entity]) -> None:
    async def body(b: FakeBroker) -> None:
        await setup_quotas(b)
        error, message, entries = await describe(b, *components, strict=strict)
        assert (error, message) == (E.none, None)
        assert entries == {entity: ALL[entity] for entity in expected}
    with_broker(body)


def test_names_are_sanitized_in_zookeeper_and_given_back_as_they_were(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        user, client = "CN=alice,O=example", "app one"
        assert (await alter(b, ((("user", user), ("client-id", client)), (op("consumer_byte_rate", 100),))))[0][0] \
            == E.none
        assert ("users", "CN%3Dalice%2CO%3Dexample/clients/app%20one") in b.zk.configs
        assert (await describe(b, ("user", EXACT, user)))[2] == {
            (("user", user), ("client-id", client)): {"consumer_byte_rate": 100.0}}
    with_broker(body)


@pytest.mark.parametrize(("entity", "ops", "message"), [
    ((), (op("producer_byte_rate", 1),), "Invalid empty client quota entity"),
    ((("foo", "x"),), (op("producer_byte_rate", 1),), "Unhandled client quota entity type: foo"),
    ((("user", "x"), ("ip", "1.2.3.4")), (op("producer_byte_rate", 1),),
     "Invalid quota entity combination, IP entity should not be used with user/client ID entity."),
    ((("ip", "1.2.3.4"),), (op("connection_creation_rate", 1),), "IP quotas (connection_creation_rate) are not supported"),
    ((("user", ""),), (op("producer_byte_rate", 1),), "Empty user not supported"),
    ((("user", "x"), ("client-id", "")), (op("producer_byte_rate", 1),), "Empty client-id not supported"),
    ((("user", "x"),), (op("foo", 1),), "Invalid configuration key foo"),
    ((("user", "x"),), (op("SCRAM-SHA-256", 1),), "Invalid configuration key SCRAM-SHA-256"),
    ((("client-id", "x"),), (op("producer_byte_rate", 1.5),), "Configuration producer_byte_rate must be a LONG value"),
    ((("client-id", "x"),), (op("consumer_byte_rate", -5),), "Configuration consumer_byte_rate must be a LONG value"),
])
def test_invalid_alterations_are_refused_and_write_nothing(with_broker: WithBroker, entity: Entity,
                                                            ops: tuple[alter_req.OpData, ...], message: str) -> None:
    async def body(b: FakeBroker) -> None:
        good = (("client-id", "ok"),)
        results = await alter(b, (entity, (op("request_percentage", 1), *ops)), (good, (op("request_percentage", 2),)))
        assert results == [(E.invalid_request, message, entity), (E.none, None, good)]
        assert b.zk.configs == {("clients", "ok"): {"request_percentage": "2.0"}}
    with_broker(body)


def test_validate_only_checks_and_writes_nothing(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        entity = (("user", "alice"),)
        assert await alter(b, (entity, (op("producer_byte_rate", 10),)), validate_only=True) == [(E.none, None, entity)]
        assert await alter(b, (entity, (op("producer_byte_rate", 0.5),)), validate_only=True) == [
            (E.invalid_request, "Configuration producer_byte_rate must be a LONG value", entity)]
        assert b.zk.configs == {}
    with_broker(body)


def test_an_entity_given_twice_gets_one_answer_and_both_alterations(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        entity = (("client-id", "c1"),)
        assert await alter(b, (entity, (op("producer_byte_rate", 100),)), (entity, (op("consumer_byte_rate", 200),))) \
            == [(E.none, None, entity)]
        assert b.zk.configs[("clients", "c1")] == {"producer_byte_rate": "100", "consumer_byte_rate": "200"}
    with_broker(body)


@pytest.mark.parametrize(("components", "error", "message"), [
    ((("user", EXACT, "a"), ("user", EXACT, "b")), E.invalid_request, "Duplicate user filter component entity type"),
    ((("client-id", ANY, None), ("client-id", ANY, None)), E.invalid_request,
     "Duplicate client filter component entity type"),
    ((("", EXACT, "a"),), E.invalid_request, "Unexpected empty filter component entity type"),
    ((("foo", EXACT, "a"),), E.unsupported_version, "Custom entity type 'foo' not supported"),
    ((("ip", ANY, None), ("user", ANY, None)), E.invalid_request,
     "Invalid entity filter component combination, IP filter component should not be used with user or clientId "
     "filter component."),
    ((("user", EXACT, None),), E.invalid_request, "Filter component for entity type 'user' has no name to match exactly"),
    ((("user", 7, "x"),), E.invalid_request, "Unexpected match type: 7"),
])
def test_malformed_filters_are_refused(with_broker: WithBroker, components: tuple[tuple[str, int, str | None], ...],
                                       error: E, message: str) -> None:
    async def body(b: FakeBroker) -> None:
        assert await describe(b, *components) == (error, message, None)
    with_broker(body)


def test_without_acls_on_the_cluster_nothing_is_described_or_altered(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        await setup_quotas(b)
        b.enable_authorizer(ADMIN)
        entity = (("user", "bob"),)
        assert await alter(b, (entity, (op("producer_byte_rate", 1),)), principal=ALICE) == [
            (E.cluster_authorization_failed, "Cluster authorization failed.", entity)]
        assert await describe(b, principal=ALICE) == (E.cluster_authorization_failed, "Cluster authorization failed.",
                                                      None)
        b.allow(ALICE, Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER)
        assert (await describe(b, principal=ALICE))[2] == ALL
        assert (await alter(b, (entity, (op("producer_byte_rate", 1),)), principal=ALICE))[0][0] \
            == E.cluster_authorization_failed
        b.allow(ALICE, Operation.ALTER_CONFIGS, ResourceType.CLUSTER)
        assert (await alter(b, (entity, (op("producer_byte_rate", 1),)), principal=ALICE))[0][0] == E.none
        assert await alter(b, (entity, (op("producer_byte_rate", 2),))) == [(E.none, None, entity)]  # a super user
    with_broker(body)


def test_version_0_speaks_the_same(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        response = await b.call(alter_v0.AlterClientQuotasRequest(validate_only=False, entries=(alter_v0.EntryData(
            entity=(alter_v0.EntityData(entity_type="client-id", entity_name="old"),),
            ops=(alter_v0.OpData(key="consumer_byte_rate", value=f64(64.0), remove=False),)),)),
            alter_v0_resp.AlterClientQuotasResponse, principal=ADMIN)
        assert [e.error_code for e in response.entries] == [E.none]
        described = await b.call(describe_v0.DescribeClientQuotasRequest(strict=False, components=(
            describe_v0.ComponentData(entity_type="client-id", match_type=i8(EXACT), match="old"),)),
            describe_v0_resp.DescribeClientQuotasResponse, principal=ADMIN)
        assert [[(v.key, v.value) for v in e.values] for e in described.entries] == [[("consumer_byte_rate", 64.0)]]
    with_broker(body)
