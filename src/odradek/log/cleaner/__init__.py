"""Kafka's log cleaner: compaction of ``cleanup.policy=compact`` logs.

``job`` is the data handed between the broker and a cleaner process; ``cleaning`` is the
sans-IO core (offset map, record filtering, grouping); ``cleaner`` runs one job over segment
files in a separate process; ``manager`` picks the filthiest log, keeps the
``cleaner-offset-checkpoint`` and swaps the cleaned segments in on the broker's loop.
"""
