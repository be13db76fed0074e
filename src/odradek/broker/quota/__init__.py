"""Client quotas (Kafka's ClientQuotaManager and QuotaFactory, KIP-13, KIP-124, KIP-219)."""
