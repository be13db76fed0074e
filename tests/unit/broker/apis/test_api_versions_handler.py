"""ApiVersions on a FakeBroker: the versions of the handler table, and Kafka's check of the
client software name and version (v3+)."""

from __future__ import annotations

import pytest
from fake_broker import FakeBroker, WithBroker
from kio.schema.api_versions.v0 import response as av0_resp
from kio.schema.api_versions.v3 import request as av_req
from kio.schema.api_versions.v3 import response as av_resp

from odradek.broker.apis import load_handlers
from odradek.broker.apis.api_versions import unsupported_api_versions
from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.framing import RequestHeaderInfo, UnsupportedRequestError, decode_response


async def api_versions(b: FakeBroker, name: str, version: str) -> av_resp.ApiVersionsResponse:
    request = av_req.ApiVersionsRequest(client_software_name=name, client_software_version=version)
    return await b.call(request, av_resp.ApiVersionsResponse)  # type: ignore[no-any-return]


def test_api_versions_lists_the_handler_table(with_broker: WithBroker) -> None:
    async def body(b: FakeBroker) -> None:
        answer = await api_versions(b, "librdkafka", "2.4.0")
        assert answer.error_code == E.none
        table = load_handlers()
        assert {k.api_key: k.max_version for k in answer.api_keys} == {k: s.max_version for k, s in table.items()}

    with_broker(body)


@pytest.mark.parametrize(("name", "version"), [("bad name!", "1.0"), ("odradek", "1.0+local"), ("-x", "1"),
                                               ("x", ""), ("x.", "1")])
def test_invalid_client_software_is_an_invalid_request(with_broker: WithBroker, name: str, version: str) -> None:
    """Kafka's ApiVersionsRequest.isValid, found by the differential oracle: INVALID_REQUEST
    and no api keys."""
    async def body(b: FakeBroker) -> None:
        answer = await api_versions(b, name, version)
        assert (answer.error_code, answer.api_keys) == (E.invalid_request, ())

    with_broker(body)


def test_an_unknown_api_versions_version_is_answered_with_the_api_versions_range_alone() -> None:
    """KIP-511's ApiVersionsRequest.getErrorResponse, as Kafka answers (the oracle's find):
    a v0 response with UNSUPPORTED_VERSION and ApiVersions' own versions."""
    header = RequestHeaderInfo(18, 99, 4242, "client", 2)
    frame = unsupported_api_versions(UnsupportedRequestError(18, 99, header))
    correlation_id, answer = decode_response(frame[4:], av0_resp.ApiVersionsResponse)
    assert (correlation_id, answer.error_code) == (4242, E.unsupported_version)
    assert [(k.api_key, k.min_version, k.max_version) for k in answer.api_keys] == [(18, 0, 4)]
    assert unsupported_api_versions(UnsupportedRequestError(3, 99, header)) is None  # not ApiVersions
