"""The documentation site (mkdocs.yml, docs/): ``mkdocs build --strict`` passes, and the reference pages that
docs/hooks.py generates from the code name every registered connector and each option its parser reads, every
`KEYS` flag and key of impulse-load, and every exit code; the hooks' own rules (an option the manual never names
fails the strict build; a manual's sections rendered as Markdown) are tested here without a build."""

from __future__ import annotations

import html
import importlib.util
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from connectors.options import OptionSpec
from connectors.registry import connectors
from impulse.loadtest import cli
from impulse.loadtest.scenario import KEYS

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def hooks():
    """docs/hooks.py, imported as MkDocs imports it (from its path)."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built strict (a warning fails it) into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
                           "--site-dir", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    return out


def _page(site: Path, path: str) -> str:
    page = site / path / "index.html"
    assert page.is_file(), f"{path}: not built"
    return page.read_text(encoding="utf-8")


@pytest.mark.docs
def test_each_connector_has_a_page_with_every_option_its_parser_reads_and_its_manual(site, hooks):
    index = _page(site, "reference/connectors")
    assert len(connectors()) >= 5
    for row in connectors():
        assert f"<code>{row.name}</code>" in index, f"the connectors' index does not name {row.name}"
        page = _page(site, f"reference/connectors/{row.name}")
        options = hooks.read_options(row)
        names = [spec.option for spec in options.own + options.protocol]
        assert len(names) >= 10, f"{row.name}: only {names} were recorded: the probe no longer parses"
        missing = [name for name in names if f"<code>{html.escape(name)}</code>" not in page]
        assert not missing, f"{row.name}'s page lacks the options {missing}"
        summary = row.data_source_class().__doc__.strip().splitlines()[0]
        assert html.escape(summary, quote=False) in page, f"{row.name}: the manual (mkdocstrings) was not rendered"


@pytest.mark.docs
def test_the_impulse_load_page_names_every_flag_key_and_exit_code(site):
    page = _page(site, "reference/impulse-load")
    for key in KEYS:
        assert f"<code>{key.name}</code>" in page, f"the TOML key {key.name} is missing"
        assert f"<code>{key.option}" in page, f"the flag {key.option} is missing"
    rows = dict(re.findall(r"<td><code>(\d+)</code></td>\s*<td>(.*?)</td>", page))
    assert rows == {str(code): html.escape(meaning, quote=False) for code, meaning in cli.EXIT_CODES.items()}


@pytest.mark.docs
def test_the_images_stay_where_the_pages_link_them_and_the_hooks_are_no_page(site):
    for image in (ROOT / "docs").glob("*.png"):
        assert (site / image.name).is_file(), f"docs/{image.name} was not copied to the site"
    assert not list(site.rglob("hooks.py")) and not list(site.rglob("*.pyc"))


@pytest.mark.docs
def test_an_option_the_manual_never_names_is_a_warning_that_fails_the_strict_build(hooks, caplog):
    row = next(r for r in connectors() if r.name == "webhook-sink")
    options = hooks.read_options(row)
    unnamed = OptionSpec("retryJitter", "number", "a number ≥ 0", "0.5", reader=options.reader)
    drifted = hooks.ConnectorOptions(options.reader, options.own + (unnamed,), options.protocol, options.passed_on)
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.reference"):
        text = hooks.connector_markdown(row, drifted, {r.name: hooks.read_options(r) for r in connectors()})
    assert "`retryJitter`" in text
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "sinks.webhook.sink:WebhookSinkDataSource: the option 'retryJitter' is read by the code but its docstring "
        "(the connector's manual) never names it: document it there"]


@pytest.mark.docs
def test_a_manuals_own_sections_become_headings_and_definition_lists(hooks):
    docstring = ("Summary.\n\nParameters (names are case-insensitive)\n----------\nurl : str, required\n"
                 "    Where rows go, e.g. ``<host>``; a\n    second line.\nlistOperation : ``append`` | ``prepend``\n"
                 "eventsPerSecond, delay,\nrampUpTime : the impulse source's\n    described.\n\nGuarantee\n---------\n"
                 "Exactly once at <servers>.\n\nExamples\n--------\n>>> df.option('x', '<y>')  # doctest: +SKIP\n")
    assert hooks.manual_markdown(docstring) == (
        "Summary.\n\n## Parameters (names are case-insensitive)\n\n`url` — str, required\n"
        ":   Where rows go, e.g. ``<host>``; a\n    second line.\n\n`listOperation` — ``append`` | ``prepend``\n\n"
        "`eventsPerSecond`, `delay`, `rampUpTime` — the impulse source's\n:   described.\n\n"
        "## Guarantee\n\nExactly once at &lt;servers>.\n\nExamples\n--------\n>>> df.option('x', '<y>')  # doctest: +SKIP\n")


def test_every_exit_code_constant_has_its_meaning_and_help_prints_them(capsys):
    constants = {value for name, value in vars(cli).items() if name.startswith("EXIT_") and isinstance(value, int)}
    assert constants and constants == set(cli.EXIT_CODES), "an EXIT_* constant without its meaning in EXIT_CODES"
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for code, meaning in cli.EXIT_CODES.items():
        assert f" {code} {meaning}" in out, f"--help does not say what exit code {code} means"
