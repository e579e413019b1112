"""The `kubetrain` command line: one entry point; each sub-command lives in its own module here.

A command module exposes `register(subparsers)`, which adds its parser and sets `handler` to a
function `(argparse.Namespace) -> int` (the process exit code). Bad input is reported on stderr as
one readable message naming what to fix, never as a traceback.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from collections.abc import Callable, Sequence

from kubetrain import __version__
from kubetrain.cli.exitcodes import EPILOG, ExitCode

Handler = Callable[[argparse.Namespace], int]

# Sub-command modules, in the order `kubetrain --help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "submit",
    "get",
    "describe",
    "logs",
    "wait",
    "delete",
    "run",
    "crds",
    "convert",
    "operator",
    "new_operator",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `only` (a command module's name), that sub-command alone, so that a
    process runs without the modules of commands it does not run (the operator at rest: about 1 MiB)."""
    parser = argparse.ArgumentParser(
        prog="kubetrain",
        description="Training jobs (TFJob, PyTorchJob, MPIJob, JAXJob, XGBoostJob, PaddleJob) on Kubernetes "
        "and locally.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"kubetrain {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES if only is None else (only,):
        module = importlib.import_module(f"kubetrain.cli.{name}")
        module.register(subparsers)
    return parser


def _unknown_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """A message with a "did you mean" when the first word is not a sub-command (argparse has none)."""
    if not argv or argv[0].startswith("-"):
        return None
    commands = [
        name
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name in action.choices
    ]
    if argv[0] in commands:
        return None
    close = difflib.get_close_matches(argv[0], commands, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"kubetrain: unknown command {argv[0]!r}{hint} (commands: {', '.join(commands)})"


def _command_module(words: Sequence[str]) -> str | None:
    """The module of the sub-command `words` name first, if they name one."""
    module = words[0].replace("-", "_") if words else ""
    return module if module in COMMAND_MODULES else None


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command_module(words))
    unknown = _unknown_command(parser, words)
    if unknown:
        print(unknown, file=sys.stderr)
        return int(ExitCode.USAGE)
    args = parser.parse_args(words)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return int(ExitCode.USAGE)
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
