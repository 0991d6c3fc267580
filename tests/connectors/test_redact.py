"""The one redactor: every sink's messages and the harness's reports hide secrets the same way."""

from connectors.redact import HIDDEN, redact_options, redact_url


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
