"""`python -m agenvoy_cli` and the `agenvoy` script. Ctrl-C while Python is still importing
and parsing (before a command starts) exits 130 with one line, never with a traceback; the
CLI restores KeyboardInterrupt once the command's module is loaded (cli.interrupts_raise),
so an interrupted command still runs its cleanups."""

import _signal  # builtin and instant; `signal` builds enums first (a Ctrl-C window of its own)
import gc
import os


def interrupted_at_start(signum: int, frame: object) -> None:
    os.write(2, b"agenvoy: interrupted\n")
    os._exit(130)


def main() -> None:
    _signal.signal(_signal.SIGINT, interrupted_at_start)
    # The start-up imports make only objects that live as long as the process: collecting
    # them found nothing and cost ~10% of `append` (#51). cli.interrupts_raise freezes them
    # and turns the collector back on once the command's module is loaded.
    gc.disable()
    from agenvoy_cli.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()
