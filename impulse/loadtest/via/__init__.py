"""The production topology, ``--via``: impulse fills a Kafka topic, the user's pipeline reads it into the sink
(`kafka`), watched until the backlog drained (`watch`) and checked (`check`); the pipeline's output topic read back
(`output_latency`) and the topology's figures for the reports (`report`).
"""
