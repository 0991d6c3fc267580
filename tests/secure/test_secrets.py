"""No password leaves a run: after writes to the secured Kafka (SASL_SSL) and Redis (TLS, ACL user) from a driver
of their own (`tests.secure.leak_driver`), and a write with a wrong password, neither password is in the driver's
and executors' logs, the printed plans and progress, the error, Spark's event log or the checkpoints."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.redis, pytest.mark.secured, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_no_password_in_logs_plans_errors_event_log_or_checkpoints(kafka_secured, redis_tls, credentials, tmp_path):
    topic = kafka_secured.create_topic("leak-" + secrets.token_hex(4), partitions=2)
    wrong = "pw-" + secrets.token_hex(12)
    args = {"out": str(tmp_path / "out"), "topic": topic, "namespace": "sec" + secrets.token_hex(5),
            "kafka": {f"kafka.{k}": v for k, v in kafka_secured.sasl_ssl_config(credentials.user,
                                                                                  credentials.password).items()},
            "redis_url": redis_tls.user_url(credentials.user, credentials.password),
            "wrong_url": redis_tls.user_url(credentials.user, wrong)}
    run = subprocess.run([sys.executable, "-m", "tests.secure.leak_driver", json.dumps(args)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stderr[-5000:]
    assert "the write with the wrong password failed" in run.stdout and "authentication failed" in run.stdout
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    event_logs = [p for p in files if "events" in p.parts]
    logged = "".join(p.read_text(errors="replace") for p in event_logs)
    assert "WriteToMicroBatchDataSource kafka-sink" in logged and "redis-sink" in logged, "no event log of the writes"
    assert any("ck-redis-sink" in str(p) for p in files) and any("ck-kafka-sink" in str(p) for p in files)
    texts = {"stdout": run.stdout, "stderr": run.stderr, **{str(p): p.read_text(errors="replace") for p in files}}
    for password in (credentials.password, wrong):
        found = [where for where, text in texts.items() if password in text]
        assert not found, f"a password is in {found}"
