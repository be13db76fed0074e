import sys

# kio (the protocol library) registers Hypothesis strategies for its types whenever Hypothesis
# is importable, and Hypothesis brings pytest and trio with it: half a second of every broker's
# and every command's start in a virtualenv with the test extras. An odradek process never
# needs it, so it is made unimportable here (not in the library: a test process keeps it).
sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from odradek.cli import run  # noqa: E402

run()
