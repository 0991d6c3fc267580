"""MkDocs hooks: the reference pages that are generated from the code when the site is built, so they cannot drift.

- ``reference/connectors/index.md`` and one page per connector: the rows of `connectors.registry.CONNECTORS`;
  on each page the options the connector's parser reads (`connectors.options.recording` around a parse of the
  options in `PROBES`) and its manual, the data source class's docstring, rendered by mkdocstrings;
- ``reference/impulse-profile.md``: ``impulse-profile``'s flags (its parser) and exit codes;
- ``reference/impulse-load.md``: every flag and TOML key (`impulse.loadtest.scenario.KEYS`) and the exit codes
  (`impulse.loadtest.cli.EXIT_CODES`).

The connector pages join the navigation in place of ``reference/connectors/index.md`` (`on_config`). An option that
a parser reads but the connector's manual never names is a warning, which ``mkdocs build --strict`` fails on.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import griffe
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

if TYPE_CHECKING:
    from connectors.options import OptionSpec
    from connectors.registry import Connector

ROOT = Path(__file__).resolve().parents[1]
log = logging.getLogger("mkdocs.hooks.reference")

CONNECTORS_INDEX = "reference/connectors/index.md"
IMPULSE_LOAD = "reference/impulse-load.md"
IMPULSE_PROFILE = "reference/impulse-profile.md"

#: Per connector, options its parser accepts without reaching a server: parsing them is how a page learns the
#: options the connector reads (every getter asked is recorded, whether or not the probe sets it).
PROBES: dict[str, dict[str, str]] = {
    "impulse": {"eventsPerSecond": "1"},
    "nexmark": {},
    "replay": {"path": "recording.parquet", "timeColumn": "ts"},
    "redis-sink": {"url": "redis://localhost:1/0", "cluster": "false"},
    "kafka-sink": {"kafka.bootstrap.servers": "localhost:1", "topic": "events"},
    "webhook-sink": {"url": "http://localhost:1/events"},
}


# ------------------------------------------------------------------------------------------------ MkDocs events


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """This checkout's code first on the path (whichever checkout an editable install points at: mkdocstrings reads
    it from ``paths: [.]``, these hooks import it); the navigation entry of ``reference/connectors/index.md``
    becomes a section: that page, then each connector's."""
    if sys.path[0] != str(ROOT):
        sys.path.insert(0, str(ROOT))
        importlib.invalidate_caches()
    from connectors.registry import connectors

    pages = [CONNECTORS_INDEX] + [{row.name: connector_page(row)} for row in connectors()]
    if not _expand(config.nav or [], CONNECTORS_INDEX, pages):
        raise ValueError(f"mkdocs.yml: the nav has no entry for {CONNECTORS_INDEX}, where the connector pages go")
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages (an existing file at one of their paths is an error: it would hide the code's)."""
    for path, text in generated_pages().items():
        if files.get_file_from_path(path) is not None:
            raise ValueError(f"docs/{path} is generated from the code: remove the file")
        files.append(File.generated(config, path, content=text))
    return files


def _expand(nav: list, target: str, pages: list) -> bool:
    """Replace the nav item whose page is `target` by a section of `pages`, in place; whether it was found."""
    for index, item in enumerate(nav):
        title, value = next(iter(item.items())) if isinstance(item, dict) else (None, item)
        if value == target:
            nav[index] = {title or "Connectors": pages}
            return True
        if isinstance(value, list) and _expand(value, target, pages):
            return True
    return False


# --------------------------------------------------------------------------------------------------- the pages


def generated_pages() -> dict[str, str]:
    """Every generated page: its path under docs/ → its Markdown."""
    from connectors.registry import connectors

    options = {row.name: read_options(row) for row in connectors()}
    pages = {CONNECTORS_INDEX: connectors_index(), IMPULSE_LOAD: impulse_load_page(),
             IMPULSE_PROFILE: impulse_profile_page()}
    for row in connectors():
        pages[connector_page(row)] = connector_markdown(row, options[row.name], options)
    return pages


def connector_page(row: Connector) -> str:
    return f"reference/connectors/{row.name}.md"


def connectors_index() -> str:
    from connectors.registry import connectors

    lines = ["# Connectors", "",
             "The data sources and sinks of this package, as `connectors.registry.CONNECTORS` lists them. Each page "
             "gives the options its parser reads (a table made from that code when this site is built) and its "
             "manual, the docstring of its data source class.", "",
             "| Format | Kind | Data source class | Install |", "|---|---|---|---|"]
    for row in connectors():
        lines.append(f"| [`{row.name}`]({row.name}.md) | {row.kind} | `{row.data_source.replace(':', '.')}` "
                     f"| `{row.install_hint()}` |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class ConnectorOptions:
    """What a connector's parser read: its own options, the protocol's (a sink) and those it passed on to another
    reader (by that reader's name: the Nexmark source passes the rest to the impulse source's)."""

    reader: str
    own: tuple[OptionSpec, ...]
    protocol: tuple[OptionSpec, ...]
    passed_on: dict[str, tuple[OptionSpec, ...]]


def read_options(row: Connector) -> ConnectorOptions:
    """Parse `PROBES`' options for `row` as the connector does, recording every option its getters ask for."""
    if row.name not in PROBES:
        raise ValueError(f"docs/hooks.py: PROBES has no options for connector {row.name!r}: add options its parser "
                         "accepts without reaching a server")
    from connectors.options import recording
    from connectors.protocol import read_sink_options

    probe = PROBES[row.name]
    cls = row.data_source_class()
    with recording() as asked:
        if row.kind == "source":
            cls(probe)
        else:
            from impulse.schema import default_schema

            sink = cls(probe)
            read_sink_options(probe, name=sink.label, build=lambda reader: sink.build(reader, default_schema(0)))
    reader = asked[0].reader
    protocol_names = {spec.option for spec in _protocol_options()} if row.kind == "sink" else set()
    passed_on: dict[str, list[OptionSpec]] = {}
    for spec in asked:
        if spec.reader != reader:
            passed_on.setdefault(spec.reader, []).append(spec)
    own = [spec for spec in asked if spec.reader == reader]
    return ConnectorOptions(reader, _once([s for s in own if s.option not in protocol_names]),
                            _once([s for s in own if s.option in protocol_names]),
                            {name: _once(specs) for name, specs in passed_on.items()})


def _protocol_options() -> list[OptionSpec]:
    from connectors.options import OptionReader, recording
    from connectors.protocol import ProtocolOptions

    with recording() as asked:
        ProtocolOptions.read(OptionReader({}, name="protocol"))
    return asked


def _once(specs: Iterable[OptionSpec]) -> tuple[OptionSpec, ...]:
    """Each option once, where it was first asked, as its typed getter has it (`OptionReader.has` says no type)."""
    first: dict[str, OptionSpec] = {}
    for spec in specs:
        if spec.option not in first or (first[spec.option].kind == "known" and spec.kind != "known"):
            first[spec.option] = spec
    return tuple(first.values())


def connector_markdown(row: Connector, options: ConnectorOptions, every: Mapping[str, ConnectorOptions]) -> str:
    from connectors.registry import connectors

    cls = row.data_source_class()
    _warn_unnamed(row, options, inspect.getdoc(cls) or "")
    verb = ("spark.readStream", "spark.read") if row.kind == "source" else ("df.writeStream", "df.write")
    clients = f" (client libraries: {', '.join(f'`{m}`' for m in row.preload)})" if row.preload else ""
    lines = [f"# {row.name}", "",
             f"A {row.kind}: `{verb[0]}.format(\"{row.name}\")` (streaming) or `{verb[1]}.format(\"{row.name}\")` "
             f"(batch). Class `{cls.__module__}.{cls.__qualname__}`; install `{row.install_hint()}`{clients}.", "",
             "## Options", "",
             "Option names are case-insensitive; an option the connector does not know fails the query when it "
             "starts. This table is made from the code that parses the options; what each one does is in the "
             "[manual](#manual).", "",
             *options_table(options.own)]
    if options.protocol:
        lines += ["", "### The commit protocol's options", "",
                  "Every sink takes these (`connectors.protocol.ProtocolOptions`).", "",
                  *options_table(options.protocol)]
    for reader in options.passed_on:
        owner = next((other for other in connectors() if every[other.name].reader == reader), None)
        where = f"[the {owner.name} source's](../connectors/{owner.name}.md#options)" if owner else f"the {reader}'s"
        lines += ["", f"Every other option goes on to {where} options; the manual says which of them it takes."]
    path = f"{cls.__module__}.{cls.__qualname__}"
    lines += ["", "## Manual", "", f"::: {path}", ""]
    return "\n".join(lines)


def options_table(specs: Iterable[OptionSpec]) -> list[str]:
    rows = ["| Option | Value | Default |", "|---|---|---|"]
    for spec in specs:
        rows.append(f"| `{spec.option}` | {_cell(_value(spec))} | {_cell(_default(spec))} |")
    return rows


def _value(spec: OptionSpec) -> str:
    if spec.choices:
        return "one of " + ", ".join(f"`{choice}`" for choice in spec.choices)
    if spec.kind == "prefix":
        return f"any option starting with `{spec.option[:-1]}`"
    if spec.kind == "known":
        return "see the manual"
    return _text(spec.allowed)


def _default(spec: OptionSpec) -> str:
    if spec.required:
        return "**required**"
    if spec.default_text is not None:
        return _text(spec.default_text)
    if spec.default is None:
        return "—"
    return f"`{spec.default}`" if spec.default else '`""` (empty)'


def _cell(markdown: str) -> str:
    """`markdown` fit for a table cell."""
    return markdown.replace("|", "\\|").replace("\n", " ")


def _text(text: str) -> str:
    """Plain `text` as Markdown (``fields.<column>.*`` keeps its ``<column>`` and its ``*``)."""
    return text.replace("<", "&lt;").replace("*", "\\*")


def _warn_unnamed(row: Connector, options: ConnectorOptions, manual: str) -> None:
    """A warning (strict builds fail) for an option the connector reads whose name its manual never mentions."""
    for spec in options.own:
        if spec.option.rstrip("*") not in manual:
            log.warning(f"{row.data_source}: the option {spec.option!r} is read by the code but its docstring (the "
                        "connector's manual) never names it: document it there")


# ----------------------------------------------------------------------------------------------- impulse-load


def impulse_load_page() -> str:
    from impulse.loadtest.cli import EXIT_CODES
    from impulse.loadtest.scenario import KEYS, Key
    from impulse.loadtest.settings.target import known_sinks

    lines = ["# impulse-load", "",
             "The load harness's command line. Every flag is also a key of a load-test file "
             "(`impulse-load run FILE.toml`), and every key a flag: both come from one table, "
             "`impulse.loadtest.scenario.KEYS`, from which this page is made. Keys of scope *file* hold one value for "
             "the whole run (a scenario that sets one is refused).", "",
             "## Flags and TOML keys"]
    groups: dict[str, list[Key]] = {}
    for key in KEYS:
        groups.setdefault(key.group, []).append(key)
    for group, keys in groups.items():
        lines += ["", f"### {group[0].upper()}{group[1:]}", "",
                  "| Flag | TOML key | [Kind](#kinds) | Default | What it does |", "|---|---|---|---|---|"]
        for key in keys:
            flag = f"`{key.option}{' ' + key.metavar if key.metavar else ''}`"
            text = key.help.replace("{sinks}", ", ".join(known_sinks())).replace("%%", "%")  # as --help prints it
            scope = " *(scope: file)*" if key.scope == "file" else ""
            lines.append(f"| {f'`{key.short}`, ' if key.short else ''}{_cell(flag)} | `{key.name}` | {_kind(key)} "
                         f"| {_cell(_text(key.describe_default()))} | {_cell(_text(text))}{scope} |")
    kinds = dict.fromkeys(key.kind for key in KEYS)
    lines += ["", "### Kinds", "", "What a flag's value, or a file key's, may be.", "",
              "| Kind | Value |", "|---|---|"]
    lines += [f"| `{kind}` | {_cell(_text(Key('', kind, None, '', '').allowed))} |" for kind in kinds]
    lines += ["", "## Exit codes", "",
              "`impulse.loadtest.cli.EXIT_CODES`, which `impulse-load --help` prints too.", "",
              "| Code | Meaning |", "|---|---|"]
    lines += [f"| `{code}` | {_cell(_text(meaning))} |" for code, meaning in EXIT_CODES.items()]
    return "\n".join(lines) + "\n"


def impulse_profile_page() -> str:
    """``impulse-profile``'s flags (its argparse parser) and exit codes."""
    from impulse.profile.cli import EXIT_CODES, parser

    lines = ["# impulse-profile", "",
             "A sample of a table → a load file and a fidelity report ([how-to](../how-to/profile-and-replay.md)). "
             "This page is made from `impulse.profile.cli.parser`.", "", "## Flags", "",
             "| Flag | Default | What it does |", "|---|---|---|"]
    for action in parser()._actions:
        if action.help is None or action.dest == "help":
            continue
        flag = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{action.dest.upper()}`"
        default = "" if action.default is None or action.default == [] else f"`{action.default}`"
        lines.append(f"| {_cell(flag)} | {_cell(default)} | {_cell(_text(action.help))} |")
    lines += ["", "## Exit codes", "", "| Code | Meaning |", "|---|---|"]
    lines += [f"| `{code}` | {_cell(_text(meaning))} |" for code, meaning in EXIT_CODES.items()]
    return "\n".join(lines) + "\n"


def _kind(key: Any) -> str:
    bound = f" ≥ {key.minimum}" if key.minimum is not None else ""
    zero = " (0 allowed)" if key.zero else ""
    return f"`{key.kind}`{bound}{zero}"


# ------------------------------------------------------------------------------------------ the manuals' sections

#: numpydoc's sections that griffe reads (and renders) itself
_NUMPYDOC = {"parameters", "other parameters", "returns", "yields", "receives", "raises", "warns", "warnings",
             "examples", "attributes", "notes", "see also", "references", "methods", "functions", "classes",
             "modules", "deprecated", "type parameters", "type aliases"}
_DASHES = re.compile(r"^-{3,}$")
_TERM = re.compile(r"^(?P<names>\S.*?) : (?P<rest>.+)$")
_NAME = re.compile(r"^[A-Za-z][\w.<>*-]*$")


class ManualSections(griffe.Extension):
    """A griffe extension for the connectors' manuals (their classes' numpydoc docstrings): a section numpydoc does
    not know (``Parameters (option names are case-insensitive)``, ``Guarantee``, ``Input columns …``) becomes a
    heading, and its ``name : type`` items, each followed by its indented description, a definition list."""

    def on_class_instance(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        if cls.docstring is not None:
            cls.docstring.value = manual_markdown(cls.docstring.value)


def manual_markdown(text: str) -> str:
    """`text` (a numpydoc docstring) with each section numpydoc does not know rewritten as Markdown, and every
    ``<`` of its prose escaped (``<servers>`` is a placeholder, not an HTML tag; examples and code stay as written)."""
    text = _sections(text)
    start = re.search(r"(?m)^Examples\n-{3,}$", text)
    cut = start.start() if start else len(text)
    return _escaped(text[:cut]) + text[cut:]


def _sections(text: str) -> str:
    """Each section numpydoc does not know as a Markdown heading (``##``: a level below the page's "Manual", as
    mkdocstrings shifts it with ``heading_level: 2``), its items as a definition list when it has some."""
    lines = text.split("\n")
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if _is_title(lines, index) and line.strip().lower() not in _NUMPYDOC:
            end = index + 2
            while end < len(lines) and not _is_title(lines, end):
                end += 1
            body = lines[index + 2:end]
            out += [f"## {line.strip()}", ""] + (_definitions(body) if _has_definitions(body) else body)
            index = end
            continue
        out.append(line)
        index += 1
    return "\n".join(out)


def _is_title(lines: list[str], index: int) -> bool:
    return bool(lines[index].strip()) and index + 1 < len(lines) and bool(_DASHES.match(lines[index + 1].strip()))


def _has_definitions(body: list[str]) -> bool:
    return any(_TERM.match(line) and following.startswith("    ") for line, following in zip(body, body[1:]))


def _definitions(body: list[str]) -> list[str]:
    """``name : type`` lines and their indented descriptions as a Markdown definition list (lines at the margin
    make one term until one has its `` : ``); a term without a description stays a paragraph."""
    out: list[str] = []
    term: list[str] = []
    described = False
    for line in body + [""]:
        if line.startswith("    ") or (not line.strip() and described):
            if term:
                out += [_term(" ".join(term)), f":   {line[4:]}"]
                term, described = [], True
            else:
                out.append(line)
        elif line.strip():
            if described:
                out.append("")
                described = False
            if term and _TERM.match(" ".join(term)):  # a whole term without a description: a paragraph
                out += [_term(" ".join(term)), ""]
                term = []
            term.append(line.strip())
        elif term:
            out += [_term(" ".join(term)), ""]
            term = []
        else:
            out.append(line)
    while out[-2:] == ["", ""]:  # the blank line added after the last item, when the section ended with one
        out.pop()
    return out


def _term(text: str) -> str:
    """``a, b : type`` → ```a`, `b` — type`` (names that are not plain option names stay as written)."""
    match = _TERM.match(text)
    names, rest = (match["names"], match["rest"]) if match else (text, "")
    shown = ", ".join(f"`{name}`" if _NAME.match(name) else name for name in names.split(", "))
    return f"{shown} — {rest}" if rest else shown


def _escaped(text: str) -> str:
    """`text` with ``<`` outside code (fenced blocks, ````…```` and ```…``` spans) escaped as ``&lt;``."""
    parts = re.split(r"(```.*?```|``.*?``|`[^`]*`)", text, flags=re.DOTALL)
    return "".join(part if part.startswith("`") else part.replace("<", "&lt;") for part in parts)
