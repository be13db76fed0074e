"""SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-2).

The connection's :class:`~odradek.security.sasl.SaslAuthenticator` does the work; these
handlers only decode and encode.  On a listener without SASL, or on a connection that is
already authenticated and not re-authenticating, both answer ILLEGAL_SASL_STATE as Kafka's
KafkaApis does.  After a refusal the connection sends the answer and closes (the socket
server sees the authenticator failed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.apis.registry import api, build, decode_body, respond, response_module
from odradek.net.server import CloseConnection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.framing import MalformedRequestError

if TYPE_CHECKING:
    from odradek.net.server import Request, Response


def _decode(request: Request) -> object:
    try:
        return decode_body(request)
    except MalformedRequestError as e:
        raise CloseConnection(f"malformed SASL request: {e}") from None


@api(ApiKey.SASL_HANDSHAKE, "SaslHandshake", 0, 1)
def handle_sasl_handshake(broker: object, request: Request) -> Response:
    body = _decode(request)
    m = response_module(ApiKey.SASL_HANDSHAKE, request.api_version)
    authenticator = request.connection.authenticator
    if authenticator is None or authenticator.authenticated:
        return respond(request, build(m.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state,
                                      mechanisms=()))
    result = authenticator.handshake(body.mechanism, request.api_version)
    return respond(request, build(m.SaslHandshakeResponse, error_code=result.error, mechanisms=result.mechanisms))


@api(ApiKey.SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2)
def handle_sasl_authenticate(broker: object, request: Request) -> Response:
    body = _decode(request)
    m = response_module(ApiKey.SASL_AUTHENTICATE, request.api_version)
    authenticator = request.connection.authenticator
    if authenticator is None or authenticator.authenticated:
        return respond(request, build(
            m.SaslAuthenticateResponse, error_code=ErrorCode.illegal_sasl_state,
            error_message="SaslAuthenticate request received after successful authentication", auth_bytes=b""))
    result = authenticator.authenticate(bytes(body.auth_bytes), request.api_version)
    return respond(request, build(m.SaslAuthenticateResponse, error_code=result.error,
                                  error_message=result.message, auth_bytes=result.auth_bytes,
                                  session_lifetime=result.session_lifetime_ms))
