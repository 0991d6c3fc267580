"""The Redis sink: options.py (RedisOptions), resp.py (RESP commands encoded with Arrow), sink.py (RedisSink,
RedisSinkDataSource), client.py (redis-py, its errors), writers.py (a single node's and a cluster's writes behind one
interface), slots.py (Redis Cluster hash slots, per-slot commit records), cluster.py (per-slot transactions on a Redis
Cluster), adapter.py (RedisAdapter). Names below resolve lazily (`sinks.lazy_names`)."""

from sinks import lazy_names

__all__ = ["RedisSinkDataSource", "RedisSink", "RedisOptions", "RedisAdapter"]

__getattr__ = lazy_names(__name__, {
    "RedisSinkDataSource": "sink",
    "RedisSink": "sink",
    "RedisOptions": "options",
    "RedisAdapter": "adapter",
})
