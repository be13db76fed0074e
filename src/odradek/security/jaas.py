"""The ``sasl.jaas.config`` value: one JAAS login module entry, as Kafka's JaasConfig reads it.

    org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="s3cret";

A login module class, a control flag (required, requisite, sufficient, optional), options as
``key=value`` (values bare or in double quotes, with backslash escapes inside quotes), and a
closing semicolon.  Kafka takes exactly one entry in the property form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["CONTROL_FLAGS", "JaasConfig", "JaasConfigError", "parse_jaas_config"]

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` value Kafka would not load."""


@dataclass(frozen=True)
class JaasConfig:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's server-side users: ``user_<name>="<password>"`` options."""
        return {key[len("user_"):]: value for key, value in self.options.items()
                if key.startswith("user_") and len(key) > len("user_")}


_TOKEN = re.compile(r'''\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))''', re.S)


def _tokens(text: str) -> list[tuple[str, str]]:
    result = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip() == "":
                break
            raise JaasConfigError(f"unexpected text in JAAS config at {text[pos:pos + 20]!r}")
        pos = m.end()
        if m["quoted"] is not None:
            result.append(("value", re.sub(r"\\(.)", r"\1", m["quoted"][1:-1])))
        elif m["word"] is not None:
            result.append(("word", m["word"]))
        else:
            result.append(("punct", m["punct"]))
    return result


def parse_jaas_config(text: str) -> JaasConfig:
    """One login module entry; raises JaasConfigError with a one-line reason."""
    if not text or not text.strip():
        raise JaasConfigError("JAAS config is empty")
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise JaasConfigError("JAAS config must start with a login module class and a control flag "
                              "(e.g. 'org.apache.kafka.common.security.scram.ScramLoginModule required ...;')")
    login_module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in CONTROL_FLAGS:
        raise JaasConfigError(f"invalid JAAS control flag {tokens[1][1]!r}; expected one of {', '.join(CONTROL_FLAGS)}")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i] != ("punct", ";"):
        if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1] != ("punct", "=") \
                or tokens[i + 2][0] == "punct":
            raise JaasConfigError("JAAS config options must be key=value (quote values with spaces)")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise JaasConfigError("JAAS config must end with ';'")
    if i + 1 != len(tokens):
        raise JaasConfigError("JAAS config in sasl.jaas.config must contain exactly one login module")
    return JaasConfig(login_module, flag, options)
