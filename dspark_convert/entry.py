"""The console-script entry point: the interrupt rule is in place before anything heavy is imported.

One rule for SIGINT (Ctrl-C) and SIGTERM, at any moment: the signal raises
:class:`~dspark_convert.errors.Interrupted` where it lands, cleanup runs (the writer removes its temporary
file), and the command ends with ONE line on stderr saying what was interrupted and that nothing was written, with
exit code 130 (SIGINT) or 143 (SIGTERM). Never a traceback. This module imports only the standard library and
``errors`` before installing the handlers, so that even a Ctrl-C during start-up (importing Typer, Rich, numpy)
gets that line.
"""

from __future__ import annotations

import sys

from .errors import Interrupted
from .interrupts import install_signal_handlers, interrupted_line


def main() -> None:
    """``dspark-convert``: install the interrupt rule, then run the command line."""
    try:  # the handlers are installed inside: a signal right after they are in place is caught here too
        install_signal_handlers()
        from .cli import main as cli_main

        cli_main()
    except Interrupted as e:  # during start-up: the CLI handles it once it runs
        sys.stderr.write(f"error: {interrupted_line(e)}\n")
        sys.stderr.flush()
        raise SystemExit(e.exit_code) from None


if __name__ == "__main__":  # python -m dspark_convert.entry
    main()
