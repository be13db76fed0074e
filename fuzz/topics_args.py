"""Target ``topics_args``: the command line of ``odradek topics`` (kafka-topics.sh's flags).

Input: the arguments as text (UTF-8, undecodable bytes replaced), one argument per line.

Entry: click's parser of the ``topics`` command (``cli.topics.topics.make_context``, with the
project's one-line usage errors), ``cli.topics.topic_command_options`` (Kafka's
TopicCommandOptions.checkArgs), then what ``--create`` and ``--alter`` check of their
arguments before asking a cluster: ``common.validate_topic_name`` and
``assignment.parse_replica_assignment``.  No process is started and nothing connects.

Property: a refusal is one of: ``SystemExit`` with code 1 (a usage error, printed on one
line), click's ``Exit`` with code 0 (``--help``), ``TopicCommandError``, or a ``KafkaError``
(an invalid topic name or replica assignment, ``AdminOperationError`` among them).
"""

from __future__ import annotations

import contextlib
import io

import click

from odradek.admin.topic_command import TopicAction, TopicCommandError
from odradek.assignment import parse_replica_assignment
from odradek.cli.topics import topic_command_options, topics
from odradek.common import validate_topic_name
from odradek.protocol.errors import KafkaError

ALLOWED = (TopicCommandError, KafkaError)


def test_one_input(data: bytes) -> None:
    argv = data.decode("utf-8", "replace").split("\n") if data else []
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            check_arguments(list(argv))  # click consumes the list it parses
        except SystemExit as e:
            assert e.code == 1, f"exit code {e.code!r} for a usage error"
            assert out.getvalue().count("\n") == 1, f"usage error not on one line: {out.getvalue()!r}"
        except click.exceptions.Exit as e:
            assert e.exit_code == 0 and any(_asks_help(arg) for arg in argv)
        except ALLOWED:
            pass


def _asks_help(arg: str) -> bool:
    """``--help``, or ``-h`` alone or among other short flags (``-hh``)."""
    return arg == "--help" or (arg.startswith("-") and not arg.startswith("--") and "h" in arg)


def check_arguments(argv: list[str]) -> None:
    """What ``odradek topics ARGV`` checks before it connects anywhere."""
    ctx = topics.make_context("topics", argv)
    opts = topic_command_options(**ctx.params)
    if opts.action is TopicAction.CREATE:
        assert opts.topic is not None
        validate_topic_name(opts.topic)
    if opts.action in (TopicAction.CREATE, TopicAction.ALTER) and opts.replica_assignment:
        parse_replica_assignment(opts.replica_assignment)
