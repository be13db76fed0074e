"""The matrix's suites: every module here that defines ``NAME`` is one (see compat/suite.py)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import cast

from compat.suite import Suite

__all__ = ["all_suites", "find"]


def all_suites() -> list[Suite]:
    """Every suite, in the table's order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "NAME"):
            found.append(cast(Suite, module))
    return sorted(found, key=lambda s: (s.ORDER, s.NAME))


def find(names: list[str]) -> list[Suite]:
    """The named suites (all when ``names`` is empty); ValueError names an unknown one."""
    suites = all_suites()
    if not names:
        return suites
    by_name = {s.NAME: s for s in suites}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"no suite {', '.join(unknown)}; the suites: {', '.join(by_name)}")
    return [by_name[n] for n in names]
