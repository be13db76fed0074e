"""The group coordinator: consumer groups and their committed offsets, kept in
``__consumer_offsets`` (Kafka's GroupCoordinator and GroupMetadataManager)."""
