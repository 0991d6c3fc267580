"""The ``stall`` fault action the cluster kill test relies on: the process names itself and waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from connectors.faults import STALL_NAME, FaultPlan
from tests.servers import wait_until

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
