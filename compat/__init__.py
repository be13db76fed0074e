"""The compatibility matrix: the Kafka ecosystem's own programs against odradek.

``python -m compat run [SUITE...] [--quick]`` runs each suite (``compat/suites/<name>.py``)
against a fresh 3-broker odradek cluster of its own (once per variant: PLAINTEXT, and SASL_SSL
where a suite asks), stops everything, and writes ``compat/RESULTS.md`` (one row per suite and
variant) and a JSON of the run under ``compat/results/`` (not committed).  ``python -m compat
list`` names the suites.  See ``compat/suite.py`` for what a suite module provides.
"""
