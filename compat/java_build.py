"""The Java client program (``compat/java``, a pinned Maven project) compiled into the JVM
cache, never into the repository.

Its build directory is ``<jvm cache>/compat-java/<digest>``, the digest being that of the pom
and the sources: a build is done once per source state (``sh scripts/bootstrap --test`` runs
``python -m compat build-java``; the suites call ``build()`` too, which returns at once when
the build exists), worktrees with different sources each find their own, and a finished
build is marked complete only after Maven succeeded.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from odradek.perf.kafka_ref import jvm_cache

__all__ = ["JavaBuildError", "build", "classpath", "source_digest"]

SOURCES = Path(__file__).resolve().parent / "java"
_COMPLETE = "complete"
_KEEP = 4  # builds of other source states kept (other worktrees, recent edits)


class JavaBuildError(RuntimeError):
    """Maven could not build the program, or it was never built."""


def source_digest(sources: Path = SOURCES) -> str:
    """A digest of the pom and every file under src/ (names and contents)."""
    digest = hashlib.sha256()
    files = [sources / "pom.xml", *sorted(p for p in (sources / "src").rglob("*") if p.is_file())]
    for path in files:
        digest.update(str(path.relative_to(sources)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _build_dir() -> Path:
    return jvm_cache() / "compat-java" / source_digest()


def classpath() -> list[Path]:
    """The program's classes and its runtime jars; JavaBuildError when this source state was
    not built."""
    directory = _build_dir()
    if not (directory / _COMPLETE).exists():
        raise JavaBuildError(f"compat/java is not built for these sources ({directory}): "
                             "run `sh scripts/bootstrap --test` or `python -m compat build-java`")
    return [directory / "classes", *sorted((directory / "lib").glob("*.jar"))]


def build() -> Path:
    """Build the program for the current sources unless that build exists; its directory."""
    directory = _build_dir()
    if (directory / _COMPLETE).exists():
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (directory / _COMPLETE).exists():
            return directory
        shutil.rmtree(directory, ignore_errors=True)
        # Maven's output is shown only when it fails (even -q prints colour codes).
        done = subprocess.run(
            ["mvn", "-B", "-q", "-Dstyle.color=never", "-f", str(SOURCES / "pom.xml"),
             f"-Dcompat.build={directory}", "compile", "dependency:copy-dependencies"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise JavaBuildError(f"mvn could not build compat/java:\n{done.stdout}{done.stderr}")
        (directory / _COMPLETE).write_text(source_digest() + "\n")
        _prune(directory.parent, keep=directory)
    return directory


def _prune(parent: Path, keep: Path) -> None:
    """Remove all but the newest few builds (by modification time) besides ``keep``."""
    builds = sorted((p for p in parent.iterdir() if p.is_dir() and p != keep), key=os.path.getmtime, reverse=True)
    for old in builds[_KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
