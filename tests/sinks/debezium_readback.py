"""What the Debezium Kafka tests share: the impulse options of an accounts changelog in Debezium's envelope, and
Debezium's envelope schema (the value payload its documentation describes) for Spark's from_json."""

IMAGE = "id BIGINT, name STRING, balance DOUBLE"
OPTIONS = {"eventsPerSecond": "1000000", "startTime": "0", "numPartitions": "2", "limit": "1200",
           "maxEventsPerTrigger": "500", "changelog.key": "id", "changelog.envelope": "debezium",
           "changelog.image": IMAGE, "changelog.weights": "1,3,1", "changelog.liveKeys": "20",
           "changelog.snapshot": "true", "changelog.table": "accounts", "fields.balance.kind": "normal",
           "fields.balance.mean": "100"}
# Debezium's envelope (its documentation's value payload), the row image as the table's columns
PAYLOAD = (f"before STRUCT<{IMAGE}>, after STRUCT<{IMAGE}>, source STRUCT<connector STRING, name STRING, "
           "table STRING, snapshot STRING, pos BIGINT>, op STRING, ts_ms BIGINT")
