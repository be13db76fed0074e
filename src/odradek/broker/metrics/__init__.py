"""The broker's metrics: plain counters on the request path, read by a Prometheus collector
at scrape time under the names the JMX exporter's standard Kafka rules give (see
docs/DESIGN.md, "Metrics")."""
