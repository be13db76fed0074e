"""ApiVersions (key 18): answered from the handler table."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from odradek.broker.apis.registry import (
    REGISTRY,
    ApiSpec,
    api,
    build,
    decode_body,
    respond,
    response_module,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import UnsupportedRequestError, encode_response

if TYPE_CHECKING:
    from odradek.net.server import Request, Response


# Advertised minimum versions below what is implemented, as Kafka 4.0 does (KAFKA-18659):
# librdkafka before 2.10 compresses with gzip or snappy only when the broker lists Produce v0,
# and sends its batches uncompressed otherwise.  Clients use the highest version both sides
# know, so v0-2 are never chosen; one that is sent anyway has no schema here and closes its
# connection, as in Kafka 4.0.
_ADVERTISED_MIN_VERSION = {ApiKey.PRODUCE: 0}


def advertised_versions(table: Mapping[int, ApiSpec]) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version, as ApiVersions advertises the handler table."""
    return {key: (_ADVERTISED_MIN_VERSION.get(key, spec.min_version), spec.max_version)
            for key, spec in sorted(table.items())}


def _response(version: int, error: ErrorCode, only: int | None = None) -> object:
    """The answer at ``version``: every advertised api key, or only the key ``only``."""
    m = response_module(ApiKey.API_VERSIONS, version)
    keys = tuple(build(m.ApiVersion, api_key=key, min_version=low, max_version=high)
                 for key, (low, high) in advertised_versions(REGISTRY).items() if only in (None, key))
    return build(m.ApiVersionsResponse, error_code=error, api_keys=keys, supported_features=(),
                 finalized_features_epoch=-1, finalized_features=(), zk_migration_ready=False)


# v4 has v3's layout; it only lets a broker advertise a feature with min version 0, which we
# never do. kafka-python 3.x opens every connection with v4; a version above this table's
# maximum gets the UNSUPPORTED_VERSION v0 answer below only when kio has no schema for it,
# so the table covers every ApiVersions version kio knows.
@api(ApiKey.API_VERSIONS, "ApiVersions", 0, 4)
def handle_api_versions(broker: object, request: Request) -> Response:
    version = request.api_version
    if version >= 3 and not _valid_client_software(decode_body(request)):
        # Kafka's ApiVersionsRequest.isValid: an INVALID_REQUEST answer with no api keys.
        return respond(request, _response(version, ErrorCode.invalid_request, only=-1))
    return respond(request, _response(version, ErrorCode.none))


# What Kafka accepts as a client software name or version (v3+): letters, digits, '-' and '.',
# starting and ending with a letter or digit.
_SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def _valid_client_software(body: Any) -> bool:
    return all(_SOFTWARE_NAME_OR_VERSION.fullmatch(value)
               for value in (body.client_software_name, body.client_software_version))


def unsupported_api_versions(error: UnsupportedRequestError) -> Response:
    """A client asking ApiVersions at a version we don't know gets Kafka's answer (KIP-511's
    ApiVersionsRequest.getErrorResponse): a v0 response with UNSUPPORTED_VERSION and the
    versions of ApiVersions alone, so it can retry with one we do."""
    if error.api_key != ApiKey.API_VERSIONS or error.header is None:
        return None
    return encode_response(_response(0, ErrorCode.unsupported_version, only=ApiKey.API_VERSIONS),
                           error.header.correlation_id)
