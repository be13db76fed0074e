"""Run one fuzz target under atheris, or replay inputs through targets without fuzzing.

    .venv/bin/python -m fuzz.runner TARGET [libFuzzer flags] [CORPUS_DIR ...]

libFuzzer writes the inputs it finds to the first corpus directory, so pass a scratch
directory first and the seed corpus after it (``bench/fuzz.py`` does).  odradek's modules are
imported inside atheris's import hook, which instruments them: libFuzzer's ``cov:`` counts
edges of odradek's code (kio's native reader and the standard library are not instrumented).
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from fuzz import TARGETS

CORPUS = Path(__file__).resolve().parent / "corpus"

TestOneInput = Callable[[bytes], None]


def load(target: str) -> ModuleType:
    """The harness module of ``target`` (one of :data:`fuzz.TARGETS`)."""
    if target not in TARGETS:
        raise ValueError(f"unknown fuzz target {target!r}; targets: {', '.join(TARGETS)}")
    return importlib.import_module(f"fuzz.{target}")


def corpus_files(target: str | None = None) -> list[Path]:
    """The seed and regression inputs of ``target`` (of every target with None), sorted."""
    dirs = [CORPUS / target] if target else [CORPUS / t for t in TARGETS]
    return sorted(p for d in dirs if d.is_dir() for p in d.iterdir() if p.is_file())


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit(f"usage: {argv[0]} TARGET [libFuzzer flags] [CORPUS_DIR ...]")
    import atheris

    # The broker logs every refused input (a closed connection, an ignored checkpoint...):
    # millions of lines that would bury libFuzzer's own.
    logging.disable(logging.CRITICAL)
    with atheris.instrument_imports(include=["odradek"]):
        harness = load(argv[1])
    atheris.Setup([argv[0], *argv[2:]], harness.test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
