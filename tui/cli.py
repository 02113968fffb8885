"""The `devtune` command: the wizard, and one headless subcommand per step.

Start-up is kept light on purpose: this module imports only argparse, and each step's commands
(`tui/commands/<step>.py`) register their arguments with argparse alone. Their handlers import
core services (and those import torch & co. only where needed) when they run.

Exit codes: 0 ok, 1 problems found, 2 usage error or unreadable input.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tui.commands import COMMAND_MODULES

VERSION = "0.1.0"
EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2


def add_common(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """-w/--workspace and --lang, accepted before or after the subcommand."""
    default = None if top else argparse.SUPPRESS
    parser.add_argument(
        "-w", "--workspace", metavar="DIR", default=default,
        help="the workspace folder (default: $DEVTUNE_WORKSPACE, else the current folder)",
    )
    parser.add_argument(
        "--lang", choices=("en", "zh"), default=default,
        help="language of messages (default: from $LANG)",
    )


def build_parser() -> tuple[argparse.ArgumentParser, set[str]]:
    parser = argparse.ArgumentParser(
        prog="devtune",
        description="From messy business text to a fine-tuned, merged and served LLM, with LLaMA-Factory "
        "on AMD Instinct GPUs (ROCm), NVIDIA GPUs, or a CPU with the tiny demo model.",
        epilog="Run `devtune` with no command to open the wizard on the workspace. "
        "Exit codes: 0 ok, 1 problems found, 2 usage error or unreadable input.",
    )
    parser.add_argument("--version", action="version", version=f"devtune {VERSION}")
    add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    names: set[str] = set()
    for module_name in COMMAND_MODULES:
        module = importlib.import_module(f"tui.commands.{module_name}")
        names |= set(module.register(sub, add_common))
    return parser, names


def _split_workspace_positional(argv: list[str], names: set[str]) -> tuple[list[str], str | None]:
    """`devtune DIR` opens the wizard on DIR: a first positional that is not a command is a workspace."""
    for i, arg in enumerate(argv):
        if arg.startswith("-"):
            if arg in ("-w", "--workspace", "--lang"):
                break  # options with a value: leave the rest to argparse
            continue
        if arg not in names:
            return argv[:i] + argv[i + 1:], arg
        break
    return argv, None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, names = build_parser()
    argv, workspace_positional = _split_workspace_positional(argv, names)
    args = parser.parse_args(argv)
    if workspace_positional is not None:
        if args.command:
            parser.error(f"unexpected argument {workspace_positional!r}")
        args.workspace = workspace_positional
    if args.lang:
        os.environ["DEVTUNE_LANG"] = args.lang
    handler = getattr(args, "handler", None)
    if handler is None:
        from tui.commands.wizard import run_wizard

        handler = run_wizard
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `devtune ... | head`: the reader went away; nothing left to say.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
