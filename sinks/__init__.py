"""The sinks: Kafka, webhook and Redis, all on the offset-commit protocol of `connectors.protocol`."""
