"""``odradek dump-log``: kafka-dump-log.sh's flags and output (Kafka 3.9's DumpLogSegments).

The work is odradek.admin.dump_log_segments'; this module reads the flags and prints.
Files that cannot be dumped (missing, not named after an offset, an index without its
segment) are refused with one line and exit code 1 before anything is printed.
"""

from __future__ import annotations

import click

from odradek.admin.dump_log_segments import (
    DEFAULT_MAX_MESSAGE_SIZE,
    INT32_MAX,
    STRING_DECODER,
    DumpLogError,
    DumpLogOptions,
    DumpProblems,
    check_files,
    dump_file,
)
from odradek.cli.common import OneLineCommand, fail

__all__ = ["dump_log"]


@click.command("dump-log", cls=OneLineCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--files", required=True, metavar="FILE1,FILE2,...",
              help="REQUIRED: The comma separated list of data and index log files to be dumped.")
@click.option("--print-data-log", is_flag=True,
              help="If set, printing the messages content when dumping data logs. Automatically set if any "
                   "decoder option is specified.")
@click.option("--deep-iteration", is_flag=True,
              help="If set, uses deep instead of shallow iteration. Automatically set if print-data-log is enabled.")
@click.option("--verify-index-only", is_flag=True,
              help="If set, just verify the index log without printing its content.")
@click.option("--index-sanity-check", is_flag=True,
              help="If set, just checks the index sanity without printing its content. This is the same check "
                   "that is executed on broker startup to determine if an index needs rebuilding or not.")
@click.option("--skip-record-metadata", is_flag=True, help="Whether to skip printing metadata for each record.")
@click.option("--max-message-size", type=int, default=DEFAULT_MAX_MESSAGE_SIZE, show_default=True,
              metavar="SIZE", help="Size of largest message.")
@click.option("--max-bytes", type=int, default=INT32_MAX, show_default=True, metavar="SIZE",
              help="Limit the amount of total batches read in bytes avoiding reading the whole .log file(s).")
@click.option("--key-decoder-class", is_flag=False, flag_value=STRING_DECODER, default=None, metavar="CLASS",
              help="If set, used to deserialize the keys: org.apache.kafka.tools.api.StringDecoder (the "
                   "default), IntegerDecoder or LongDecoder.")
@click.option("--value-decoder-class", is_flag=False, flag_value=STRING_DECODER, default=None, metavar="CLASS",
              help="If set, used to deserialize the messages: org.apache.kafka.tools.api.StringDecoder (the "
                   "default), IntegerDecoder or LongDecoder.")
def dump_log(files: str, print_data_log: bool, deep_iteration: bool, verify_index_only: bool,
             index_sanity_check: bool, skip_record_metadata: bool, max_message_size: int, max_bytes: int,
             key_decoder_class: str | None, value_decoder_class: str | None) -> None:
    """Parse log segment files (.log, .index, .timeindex, .txnindex, .snapshot) and dump their
    contents, as kafka-dump-log.sh does."""
    # Java's String.split drops trailing empty strings.
    names = files.split(",")
    while names and not names[-1]:
        names.pop()
    options = DumpLogOptions(tuple(names), print_data_log, deep_iteration, verify_index_only, index_sanity_check,
                             skip_record_metadata, max_message_size, max_bytes, key_decoder_class,
                             value_decoder_class)
    try:
        check_files(options)
    except DumpLogError as e:
        fail(str(e))
    problems = DumpProblems()
    out = click.get_text_stream("stdout")
    try:
        for path in options.files:
            for line in dump_file(path, options, problems, lambda text: click.echo(text, err=True)):
                out.write(line + "\n")
    except (DumpLogError, OSError) as e:
        out.flush()
        fail(str(e))
    out.flush()
    for line in problems.lines():
        click.echo(line, err=True)
