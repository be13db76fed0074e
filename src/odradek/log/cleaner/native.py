"""The compiled record scanner (``record_scan.c``): built with the machine's C compiler into a
cache outside the repository, loaded with ctypes, and used by
:func:`~odradek.log.cleaner.record_scanner.scan_records` when it is there.

The cleaner's map phase is a loop over every record's key, which the interpreter runs at about
1.5 us a record; compiled, the walk costs a few per cent of that and what remains is making the
key objects and the offset map.  Nothing needs it: without a compiler, or with
``ODRADEK_PURE_PYTHON=1``, the Python scanner does the work, and it stays the reference the
compiled one is tested against.  ``scripts/bootstrap`` builds it (:func:`build`); the library's
name carries a hash of the source, so a changed source is never served by an old build.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["SOURCE", "NativeScan", "build", "library_path", "load"]

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("record_scan.c")

# scan(buf, pos, end, count, base_offset, positions, out) -> 0, or -1: scan it in Python.
NativeScan = Callable[[bytes, int, int, int, int, int, "ctypes.Array[ctypes.c_int64]"], int]


def library_path() -> Path:
    """Where the library built from the current source lives (``ODRADEK_NATIVE_DIR``, else
    ``~/.cache/odradek/native``)."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    root = os.environ.get("ODRADEK_NATIVE_DIR") or Path.home() / ".cache" / "odradek" / "native"
    return Path(root) / f"record_scan-{digest}-{platform.machine()}.so"


def build() -> Path | None:
    """Compile the scanner unless it is built already; None when there is no C compiler.
    Raises CalledProcessError when the compiler fails."""
    if not SOURCE.exists():  # an install without the source
        return None
    target = library_path()
    if target.exists():
        return target
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=target.parent, suffix=".so.partial")
    os.close(fd)
    try:
        subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", partial, str(SOURCE)], check=True,
                       capture_output=True)
        os.replace(partial, target)  # whole or not at all, for a concurrent build
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def load() -> NativeScan | None:
    """The compiled scan function, or None: not built (or no source to know it by), or
    ``ODRADEK_PURE_PYTHON`` set."""
    if os.environ.get("ODRADEK_PURE_PYTHON") or not SOURCE.exists():
        return None
    path = library_path()
    if not path.exists():
        return None
    try:
        library = ctypes.CDLL(str(path))
    except OSError as e:
        log.warning("Cleaner: the compiled record scanner %s does not load (%s); scanning in Python", path, e)
        return None
    scan = library.odradek_scan_records
    scan.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                     ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    scan.restype = ctypes.c_int
    return scan  # type: ignore[no-any-return]
