"""``odradek console``: a small web console over the Kafka protocol (and the brokers' Prometheus
metrics when known): the placement map, the cluster, topics, consumer groups and security.

``model`` is sans-IO (what a page shows, computed from plain data), ``pages`` renders HTML
(every cluster-provided string escaped), ``cluster_reader`` asks the cluster through the admin
layer, and ``server`` is the aiohttp application that ties them together."""
