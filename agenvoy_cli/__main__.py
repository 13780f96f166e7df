"""`python -m agenvoy_cli` and the `agenvoy` script. Ctrl-C while Python is still importing
the CLI exits 130 with one line, like Ctrl-C later on, never with a traceback."""

import os
import signal


def _interrupted(signum: int, frame: object) -> None:
    os.write(2, b"agenvoy: interrupted\n")
    os._exit(130)


def main() -> None:
    signal.signal(signal.SIGINT, _interrupted)  # until the CLI's own handling takes over
    from agenvoy_cli.cli import main as cli_main

    signal.signal(signal.SIGINT, signal.default_int_handler)
    cli_main()


if __name__ == "__main__":
    main()
