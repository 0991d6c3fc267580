"""The one redactor: every sink's messages and the harness's reports hide secrets the same way."""

from connectors.redact import HIDDEN, SPARK_DEFAULT_REDACTION, SPARK_REDACTION_REGEX, redact_options, redact_url
from impulse.session import harness_settings


def test_urls_lose_user_info_query_and_fragment():
    assert redact_url("redis://user:pw@host:6379/0") == "redis://host:6379/0"
    assert redact_url("https://u:p@[::1]:8443/hook?token=abc#x") == "https://[::1]:8443/hook"
    assert redact_url("http://127.0.0.1:9/x") == "http://127.0.0.1:9/x"


def test_a_value_that_does_not_parse_is_hidden_whole():
    assert redact_url("http://host:99999999/x") == HIDDEN


def test_secret_options_are_hidden_by_name():
    hidden = redact_options({"sasl.password": "pw", "ssl.key.pem": "k", "api_key": "k", "keyPrefix": "events:",
                             "commitUrl": "http://a:b@h/c?sig=1"})
    assert hidden == {"sasl.password": HIDDEN, "ssl.key.pem": HIDDEN, "api_key": HIDDEN, "keyPrefix": "events:",
                      "commitUrl": "http://h/c"}


SECRETS = {"schema.registry.basic.auth.user.info": "writer:pw-registry", "kafka.sasl.password": "pw-sasl",
           "kafka.ssl.key.password": "pw-key", "kafka.sasl.jaas.config": "ScramLoginModule required username=w;",
           "fs.s3a.access.key": "AKIA-spark-default", "kafka.sasl.oauthbearer.client.secret": "pw-oauth"}


def _set_output(spark, regex: str | None) -> dict[str, str]:
    """What Spark's ``SET`` shows of `SECRETS` in a new session of the test's context with `regex` as its
    ``spark.redaction.regex`` (None: Spark's default). The harness gives it when the session is built; a running
    context's core settings are read-only unless the legacy flag lets ``SET`` change them, as here."""
    session = spark.newSession()
    if regex is not None:
        session.conf.set("spark.sql.legacy.setCommandRejectsSparkCoreConfs", "false")
        session.conf.set("spark.redaction.regex", regex)
    for key, value in SECRETS.items():
        session.conf.set(key, value)
    return {row.key: row.value for row in session.sql("SET").collect() if row.key in SECRETS}


def test_the_harness_session_makes_spark_hide_the_secrets_its_default_shows(spark):
    """Spark's own redaction (the UI, event log, ``SET`` and plans' options) with the harness's setting hides every
    secret-looking option; with Spark's default a registry's user info and a JAAS config without ``password=``
    are shown."""
    regex = harness_settings()["spark.redaction.regex"]
    assert regex == SPARK_REDACTION_REGEX and regex.startswith(SPARK_DEFAULT_REDACTION)
    default = _set_output(spark, None)
    assert default["schema.registry.basic.auth.user.info"] == "writer:pw-registry"
    assert default["kafka.sasl.jaas.config"] == SECRETS["kafka.sasl.jaas.config"]
    shown = _set_output(spark, regex)
    assert set(shown) == set(SECRETS)
    leaked = [key for key, value in shown.items() if SECRETS[key] in value]
    assert not leaked, shown
    assert harness_settings({"spark.redaction.regex": "(?i)mine"})["spark.redaction.regex"] == "(?i)mine"
