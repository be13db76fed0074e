"""Target ``spark_options``: the options a Spark job gives the ``odradek`` data source.

Input: a byte choosing what is parsed (0: ``spark.readStream``, 1: ``spark.read``, 2: the
rules both share, 3: ``df.write``), then the options as text (UTF-8, undecodable bytes
replaced), one ``key=value`` per line.

Entry: ``spark.options.parse_source_options`` and ``parse_sink_options``, pure Python (Spark
is not started): Spark hands them its case-insensitive option map.

Property: only ``OptionError`` (a ValueError naming the option) is raised.
"""

from __future__ import annotations

from odradek.spark.options import OptionError, parse_sink_options, parse_source_options

ALLOWED = (OptionError,)
_STREAMING = (True, False, None)


def options(text: str) -> dict[str, str]:
    """``key=value`` lines as Spark's option map (a line without ``=`` is a key with an empty value)."""
    parsed: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        parsed[key] = value
    return parsed


def test_one_input(data: bytes) -> None:
    if not data:
        return
    mode = data[0] % 4
    opts = options(data[1:].decode("utf-8", "replace"))
    try:
        if mode == 3:
            parse_sink_options(opts)
        else:
            parse_source_options(opts, streaming=_STREAMING[mode])
    except ALLOWED:
        pass
