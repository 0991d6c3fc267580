"""The ``stall`` and ``delay`` fault actions: a stalled process names itself and waits (killed, or resumed by
SIGUSR1); a delay sleeps and goes on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connectors.errors import OptionError
from connectors.faults import STALL_NAME, FaultPlan
from connectors.servers import wait_until

ROOT = Path(__file__).resolve().parents[2]


def test_stall_parses_and_matches_like_the_other_actions():
    plan = FaultPlan.parse("point=mid_write,action=stall,batch=0,partition=0,attempt=0")
    assert plan == FaultPlan("mid_write", "stall", 0, 0, 0)
    assert plan.matches("mid_write", 0, 0, 0) and not plan.matches("mid_write", 0, 0, 1)


def test_a_stalled_process_is_findable_by_name_until_killed():
    code = "from connectors.faults import FaultPlan; FaultPlan('mid_write', 'stall').hit('mid_write', 3, 0, 0)"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    try:
        comm = Path(f"/proc/{proc.pid}/comm")
        wait_until(lambda: comm.read_text().strip() == STALL_NAME, 30, 0.05, "the process to name itself")
        assert proc.poll() is None  # still there: stalled, not crashed
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL


def test_a_stalled_process_goes_on_after_sigusr1_with_its_name_back():
    code = ("import sys; from connectors.faults import FaultPlan; FaultPlan('mid_write', 'stall').hit('mid_write', 3, 0, 0); "
            "print(open('/proc/self/comm').read().strip())")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    try:
        comm = Path(f"/proc/{proc.pid}/comm")
        wait_until(lambda: comm.read_text().strip() == STALL_NAME, 30, 0.05, "the process to name itself")
        proc.send_signal(signal.SIGUSR1)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out.strip() != STALL_NAME  # the write went on, under its own name again


def test_delay_sleeps_and_goes_on_and_needs_its_ms():
    plan = FaultPlan.parse("point=before_write,action=delay,ms=30,partition=1")
    started = time.monotonic()
    plan.hit("before_write", 0, 1, 0)
    assert time.monotonic() - started >= 0.03
    started = time.monotonic()
    plan.hit("before_write", 0, 0, 0)  # another partition: no delay
    assert time.monotonic() - started < 0.03
    for text in ("point=before_write,action=delay", "point=before_write,action=fail,ms=5",
                 "point=before_write,action=delay,ms=-1"):
        with pytest.raises(OptionError, match="ms=N"):
            FaultPlan.parse(text)
