"""The transaction coordinator's groundwork: transactional ids, their state machine and
their records in ``__transaction_state`` (Kafka's TransactionMetadata and TransactionLog,
KIP-98/KIP-360).  Sans-IO; the transaction coordinator will be built on top of it."""
