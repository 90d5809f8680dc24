"""Ctrl-C at any moment of a real ``dspark-convert check`` run (issue 37, bug 17): an interrupt never ends with a
verdict. The console script is started, SIGINT is sent at a sweep of moments from 0 to 300 ms, each time to a
process that is still running (it is stopped with SIGSTOP first; a process that had already ended, or was
already ending, is counted apart), and every outcome is one of the documented ones (docs/troubleshooting.md, "Interrupts"):

- exit 130 with one ``error: interrupted (SIGINT) while ...; nothing was written`` line (the handlers were in place;
  also where the exception the handler raised was swallowed on its way up: the signal is recorded);
- ended by SIGINT (``-2``): before the handlers are installed (Python's own ``KeyboardInterrupt``) or after the last
  line, while the interpreter shuts down;
- before the handlers exist, CPython's own start-up rules, with no frame of the tool's code: exit 1 with nothing
  on stdout (``Fatal Python error: init_...``, after Python's ``KeyboardInterrupt`` or, when it lands while the
  standard streams are set up, another exception of CPython's ``io`` import), or Python's ``KeyboardInterrupt``
  reported by ``site`` while it was running a ``.pth`` file and swallowed, the command then running to its end.

Never exit 0, 1 or 2 once the tool's handlers are installed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SCRIPT = Path(sys.executable).with_name("dspark-convert")
DELAYS_MS = (0, 2, 4, 6, 8, 10, 12, 14, 17, 20, 25, 30, 40, 50, 65, 80, 100, 125, 150, 180, 210, 250, 300)


def _interrupt_at(cmd: list[str], delay_ms: int) -> tuple[str, int, str, str]:
    """Start ``cmd``, send SIGINT after ``delay_ms`` to the process if it still runs; ``(state, rc, out, err)``,
    state ``"finished"`` when it had ended before the signal, else ``"signalled"``."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(delay_ms / 1000)
        # freeze it, and wait until it is frozen or has ended: a process already on its way out (tearing down its
        # memory) cannot be stopped or signalled, and its exit is that of a finished command
        os.kill(proc.pid, signal.SIGSTOP)  # not send_signal: it would reap an ended child first
        _, status = os.waitpid(proc.pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            proc.returncode = os.waitstatus_to_exitcode(status)
            out, err = proc.communicate(timeout=60)
            return "finished", proc.returncode, out, err
        os.kill(proc.pid, signal.SIGINT)
        os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=60)
        return "signalled", proc.returncode, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _outcome(rc: int, out: str, err: str) -> str:
    """The documented outcome a signalled run matches, or ``"UNEXPECTED"``."""
    lines = err.splitlines()
    if rc == 130 and lines and lines[-1].startswith("error: interrupted (SIGINT) while ") \
            and lines[-1].endswith("; nothing was written") and "Traceback" not in err:
        return "130 one line"
    if rc == -signal.SIGINT:
        return "ended by SIGINT"
    # before the tool's handlers exist: Python's own KeyboardInterrupt, raised in CPython's start-up (site and its
    # .pth files, the script's first imports) with no frame of the tool's code; CPython then stops with exit 1
    # and nothing on stdout, or site reports and swallows it and the command runs to its end
    no_tool_frame = re.search(r'File "[^"]*/dspark_convert/', err) is None
    before_handlers = "KeyboardInterrupt" in err and no_tool_frame
    # CPython's fatal start-up error: the interrupt can land inside the import of ``io`` while the standard
    # streams are set up and surface as another exception there (``TypeError: expected a message argument``)
    cpython_fatal = err.startswith("Fatal Python error: init_") or "failed to set __main__.__loader__" in err
    if rc == 1 and out == "" and (before_handlers or (cpython_fatal and no_tool_frame)):
        return "CPython start-up: exit 1"
    if rc == 0 and before_handlers:
        return "CPython start-up: swallowed by site"
    return "UNEXPECTED"


def test_ctrl_c_at_any_moment_of_check_never_ends_with_a_verdict(converted: object, tmp_path: Path) -> None:
    assert SCRIPT.is_file(), f"{SCRIPT}: the console script of this environment (pip install -e .)"
    draft = converted("dspark-qwen3")  # type: ignore[operator]
    cmd = [str(SCRIPT), "check", str(draft)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "PASS" in done.stdout.upper(), done.stdout + done.stderr

    seen: Counter[str] = Counter()
    unexpected = []
    for delay in DELAYS_MS:
        state, rc, out, err = _interrupt_at(cmd, delay)
        if state == "finished":  # it ended before the signal: its verdict stands
            assert (rc, out) == (0, done.stdout)
            seen["finished first"] += 1
            continue
        outcome = _outcome(rc, out, err)
        seen[outcome] += 1
        if outcome == "UNEXPECTED":
            unexpected.append((delay, rc, out[-200:], err[-3000:]))
    assert unexpected == [], unexpected
    # the sweep did interrupt running processes, and reached the tool's own handlers
    assert seen["130 one line"] >= 1, seen
    assert sum(n for k, n in seen.items() if k != "finished first") >= len(DELAYS_MS) // 2, seen


# A library that swallows every exception: the child's hook sends SIGINT to itself inside ``try: ... except
# BaseException: pass`` while ``check`` runs its rules, and the command goes on to print its verdict.
SWALLOWING_CHILD = textwrap.dedent("""
    import os, signal, sys
    import dspark_convert.check as check

    rules = check.check_plan

    def swallowing(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs at one of these steps
                pass
        except BaseException:
            pass
        return rules(*args, **kwargs)

    check.check_plan = swallowing
    sys.argv = ["dspark-convert", "check", sys.argv[1]]
    from dspark_convert.entry import main
    main()
""")


def test_an_interrupt_swallowed_on_its_way_up_still_ends_the_command(converted: object) -> None:
    draft = converted("dspark-qwen3")  # type: ignore[operator]
    r = subprocess.run([sys.executable, "-c", SWALLOWING_CHILD, str(draft)], capture_output=True, text=True,
                       timeout=120)
    # the verdict was printed (the rules ran), but the exit is the interrupt's, with its one line
    assert "passes every loader rule" in r.stdout
    assert (r.returncode, r.stderr) == (130, "error: interrupted (SIGINT) while printing the result; "
                                             "nothing was written\n")
