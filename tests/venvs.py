"""Fresh virtual environments for the packaging tests: the lowest version of every dependency setup.cfg allows,
and the built wheel with each extra. setup.cfg is the one list of ranges; this module only reads it.

Environments are cached under ``$IMPULSE_CACHE/venvs/<name>-<hash>``, the hash taken over setup.cfg,
pyproject.toml and what is installed, so a rerun with unchanged packaging reuses them (seconds, not minutes).
``python3 -m tests.venvs lowest`` builds (or finds) the lowest-versions environment and prints its interpreter.
"""

from __future__ import annotations

import configparser
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

try:
    from packaging.requirements import Requirement
except ImportError:  # a bare interpreter: pip carries its own copy
    from pip._vendor.packaging.requirements import Requirement

from connectors.registry import sinks

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("IMPULSE_CACHE", Path.home() / ".cache" / "impulse"))
# the extras a user installs for a feature: each sink's (`connectors.registry`), then the harness's; `test` and
# `bench` add the test and benchmark tools
FEATURE_EXTRAS = (*(row.extra for row in sinks() if row.extra), "load", "report", "connect", "faker")
_PIP = ("-m", "pip", "install", "-q", "--disable-pip-version-check", "--root-user-action=ignore")


def packaging_hash() -> str:
    """16 hex digits over setup.cfg and pyproject.toml: what decides which environments are current."""
    digest = hashlib.sha256()
    for name in ("setup.cfg", "pyproject.toml"):
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()[:16]


def requirements(extras: tuple[str, ...] = ()) -> list[Requirement]:
    """setup.cfg's install_requires plus the given extras' requirements, those whose marker holds on this
    interpreter, one per distribution (the first listing's range wins, the extras asked by any listing are kept;
    the extras repeat the same ranges)."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options"]["install_requires"].splitlines()
    for extra in extras:
        lines += config["options.extras_require"][extra].splitlines()
    found: dict[str, Requirement] = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if line:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate():
                first = found.setdefault(req.name.lower(), req)
                first.extras |= req.extras  # a later listing's extras still count (confluent-kafka[avro,…])
    return list(found.values())


def lowest(reqs: list[Requirement]) -> list[str]:
    """``name==floor`` for each requirement: its ``>=`` bound (``==`` pins stay as they are). A requirement
    without a floor is an error: "the lowest allowed version" would be whatever is oldest on PyPI."""
    pins = []
    for req in reqs:
        floors = [s.version for s in req.specifier if s.operator in (">=", "==")]
        if len(floors) != 1:
            raise ValueError(f"setup.cfg: {req} needs exactly one '>=' (or '==') bound to test its lowest version")
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""  # e.g. confluent-kafka[avro,…]
        pins.append(f"{req.name}{extras}=={floors[0]}")
    return pins


def build(name: str, installs: list[list[str]], python: str = sys.executable, key_args: object = None) -> Path:
    """The interpreter of a virtual environment with each pip argument list of ``installs`` installed in turn,
    built once per (name, packaging hash, installs, or `key_args` instead of installs when given) and reused
    after. A build that fails leaves nothing behind that a rerun would mistake for a finished environment."""
    what = installs if key_args is None else key_args
    key = hashlib.sha256(repr((packaging_hash(), what, python)).encode()).hexdigest()[:12]
    home = CACHE / "venvs" / f"{name}-{key}"
    ready = home / ".ready"
    exe = home / "bin" / "python"
    if ready.exists():
        return exe
    for stale in home.parent.glob(f"{name}-*"):  # this name's environments of earlier packaging: ~1 GB each
        shutil.rmtree(stale, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(home)], check=True, stdout=sys.stderr)
    for args in installs:  # pip's output to stderr: `python3 -m tests.venvs lowest` prints only the interpreter
        subprocess.run([str(exe), *_PIP, *args], check=True, cwd=ROOT, stdout=sys.stderr)
    ready.touch()
    return exe


def lowest_env() -> Path:
    """An environment with the lowest allowed version of every direct dependency (install_requires and each
    feature extra) and of the test tools, wheels only (PySpark publishes only a source distribution, pure
    Python), and this checkout installed editable without
    dependencies (PySpark's workers import the ``pyspark_*`` modules and ``impulse``/``sinks`` from it)."""
    pins = lowest(requirements(FEATURE_EXTRAS + ("test",)))
    return build("lowest", [["--only-binary=:all:", "--no-binary=pyspark", *pins],
                            ["--no-deps", "--config-settings", "editable_mode=compat", "-e", "."]])


def wheel(out: Path) -> Path:
    """This checkout's wheel as a regular install gets it (``pip wheel --no-deps .``), built into `out`."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps",
                    "-w", str(out), str(ROOT)], check=True)
    return sorted(out.glob("impulse_connectors-*.whl"))[-1]


def wheel_env(built: Path, extras: tuple[str, ...] = ()) -> Path:
    """An environment with the wheel `built` installed (regular, not editable) with `extras`: the dependencies
    are installed once per packaging hash; the wheel itself is reinstalled on every call (the code changes)."""
    suffix = f"[{','.join(extras)}]" if extras else ""
    exe = build("wheel-" + ("-".join(extras) or "plain"),
                [["--only-binary=:all:", "--no-binary=pyspark", f"{built}{suffix}"]], key_args=suffix)
    subprocess.run([str(exe), *_PIP, "--no-deps", "--force-reinstall", str(built)], check=True, stdout=sys.stderr)
    return exe


if __name__ == "__main__":
    if sys.argv[1:] == ["lowest"]:
        print(lowest_env())
    elif sys.argv[1:] == ["pins"]:
        print("\n".join(lowest(requirements(FEATURE_EXTRAS + ("test",)))))
    else:
        sys.exit("usage: python3 -m tests.venvs lowest|pins")
