"""Coverage-guided fuzz targets (atheris, libFuzzer), one harness module per target.

Each module names its entry point (the code the broker or a tool runs on outside bytes), the
property it checks and the exceptions it allows in its docstring, and has a
``test_one_input(data: bytes) -> None`` that raises on a violation.  ``fuzz.runner`` runs one
target under atheris; ``bench/fuzz.py`` runs them for a set time; the seed corpora are
``fuzz/corpus/<target>/`` (made by ``fuzz/capture_seeds.py`` from real clients and
``fuzz/make_seeds.py`` from the project's own encoders), replayed by
``tests/unit/test_fuzz_corpus.py``.

Nothing here imports odradek at module level: the runner imports a target inside atheris's
import hook, so odradek's modules are instrumented for coverage.
"""

TARGETS = (
    "request_frame",
    "record_batch",
    "log_recovery",
    "sasl",
    "znode_json",
    "spark_options",
    "topics_args",
)
