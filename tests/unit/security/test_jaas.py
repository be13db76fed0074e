"""security/jaas.py: the sasl.jaas.config value as Kafka's JaasConfig reads it."""

from __future__ import annotations

import pytest

from odradek.security.jaas import JaasConfigError, parse_jaas_config


def test_scram_login_module() -> None:
    cfg = parse_jaas_config('org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="admin" password="admin-secret";')
    assert cfg.login_module == "org.apache.kafka.common.security.scram.ScramLoginModule"
    assert cfg.control_flag == "required"
    assert cfg.options == {"username": "admin", "password": "admin-secret"}


def test_plain_users_and_quoting() -> None:
    cfg = parse_jaas_config('org.apache.kafka.common.security.plain.PlainLoginModule Required\n'
                            '  username=admin password="a b\\"c;d"\n  user_admin="x" user_alice=alice-pw ;')
    assert cfg.options["password"] == 'a b"c;d'
    assert cfg.plain_users() == {"admin": "x", "alice": "alice-pw"}


@pytest.mark.parametrize(("text", "message"), [
    ("", "empty"),
    ("org.Foo required username=a", "end with ';'"),
    ("org.Foo mandatory;", "control flag"),
    ("org.Foo required username;", "key=value"),
    ("org.Foo required a=b; org.Bar required c=d;", "exactly one"),
    ('org.Foo required a="unterminated;', "unexpected|key=value|end with"),
])
def test_errors(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message):
        parse_jaas_config(text)
