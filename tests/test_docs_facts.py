"""Facts the documentation states that setup.cfg states too, compared, so that neither drifts: the pytest markers
(``[tool:pytest]`` ``markers``) that docs/how-to/tests.md lists, and the lowest Python ``python_requires`` allows,
which docs/how-to/install.md names."""

from __future__ import annotations

import configparser
import re

from tests.readme import DOCS, ROOT, section


def setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return config


def test_the_tests_guide_lists_every_pytest_marker_of_setup_cfg():
    declared = {line.split(":")[0].strip() for line in setup_cfg()["tool:pytest"]["markers"].splitlines()
                if line.strip()}
    assert {"integration", "schema_registry", "docs"} <= declared, "setup.cfg's markers were not read"
    listed = set(re.findall(r"^\| `(\w+)` \|", section("## Markers", DOCS / "how-to" / "tests.md"), re.MULTILINE))
    assert listed == declared, f"docs/how-to/tests.md's markers: add {declared - listed}, drop {listed - declared}"


def test_the_install_guide_names_the_lowest_python_setup_cfg_allows():
    requires = setup_cfg()["options"]["python_requires"]
    [lowest] = re.fullmatch(r">=\s*(\d+\.\d+)", requires.strip()).groups()
    text = " ".join(section("## Supported versions", DOCS / "how-to" / "install.md").split())
    assert f"allows {lowest} and later (`python_requires`)" in text, f"docs/how-to/install.md: setup.cfg has {requires}"
