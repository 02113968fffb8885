"""The `devtune` command: the wizard, and one headless subcommand per step.

Start-up is kept light on purpose: this module imports only argparse (and core.i18n, which needs
only json and os), and each step's commands (`cli/commands/<step>.py`) register their arguments
with argparse alone. Their handlers import core services (and those import torch & co. only where
needed) when they run.

The language of the help texts is known before the parser is built: `--lang` is looked for in argv
first (else DEVTUNE_LANG / LC_ALL / LC_MESSAGES / LANG decide), since register() translates them.

Exit codes: 0 ok, 1 problems found, 2 usage error or unreadable input. A devtune error raised by a
handler is turned into its exit code here, once (core/errors.py holds the table).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from cli.commands import COMMAND_MODULES
from core.errors import EXIT_INTERRUPTED, EXIT_OK, DevtuneError
from core.i18n import LANGUAGES, _, current_language

VERSION = "0.1.0"


def add_common(parser: argparse.ArgumentParser, *, top: bool = False) -> None:
    """-w/--workspace and --lang, accepted before or after the subcommand."""
    default = None if top else argparse.SUPPRESS
    parser.add_argument(
        "-w", "--workspace", metavar="DIR", default=default,
        help=_("the workspace folder (default: $DEVTUNE_WORKSPACE, else the current folder)"),
    )
    parser.add_argument(
        "--lang", choices=("en", "zh"), default=default,
        help=_("language of messages (default: from $LANG)"),
    )


def build_parser() -> tuple[argparse.ArgumentParser, set[str]]:
    parser = argparse.ArgumentParser(
        prog="devtune",
        description=_("From messy business text to a fine-tuned, merged and served LLM, with LLaMA-Factory "
                      "on AMD Instinct GPUs (ROCm), NVIDIA GPUs, or a CPU with the tiny demo model."),
        epilog=_("Run `devtune` with no command to open the wizard on the workspace. "
                 "Exit codes: 0 ok, 1 problems found, 2 usage error or unreadable input."),
    )
    parser.add_argument("--version", action="version", version=f"devtune {VERSION}",
                        help=_("show program's version number and exit"))
    add_common(parser, top=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    names: set[str] = set()
    for module_name in COMMAND_MODULES:
        module = importlib.import_module(f"cli.commands.{module_name}")
        names |= set(module.register(sub, add_common))
    parser.commands = sub.choices  # name -> its parser: a wrong flag is reported with that command's usage
    return parser, names


def lang_from_argv(argv: list[str]) -> str | None:
    """The value of the last valid `--lang zh|en` / `--lang=zh` in argv (before a `--`), else None."""
    found = None
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--lang" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--lang="):
            value = arg.partition("=")[2]
        else:
            continue
        if value in LANGUAGES:
            found = value
    return found


def _argparse_messages() -> dict[str, str]:
    """argparse's own words (headings, its -h help, its errors), in the current language."""
    return {
        "usage: ": _("usage: "),
        "positional arguments": _("positional arguments"),
        "options": _("options"),
        "show this help message and exit": _("show this help message and exit"),
        "%(prog)s: error: %(message)s\n": _("%(prog)s: error: %(message)s\n"),
        "the following arguments are required: %s": _("the following arguments are required: %s"),
        "unrecognized arguments: %s": _("unrecognized arguments: %s"),
        "argument %(argument_name)s: %(message)s": _("argument %(argument_name)s: %(message)s"),
        "invalid choice: %(value)r (choose from %(choices)s)":
            _("invalid choice: %(value)r (choose from %(choices)s)"),
        "invalid %(type)s value: %(value)r": _("invalid %(type)s value: %(value)r"),
        "expected one argument": _("expected one argument"),
        "not allowed with argument %s": _("not allowed with argument %s"),
        "ambiguous option: %(option)s could match %(matches)s":
            _("ambiguous option: %(option)s could match %(matches)s"),
    }


_ARGPARSE_GETTEXT = argparse._


def _localize_argparse() -> None:
    """argparse asks gettext for its words; in Chinese, answer from devtune's catalog instead (and in English
    from argparse's own again, for a process that calls main() more than once)."""
    if current_language() == "en":
        argparse._ = _ARGPARSE_GETTEXT
        return
    table = _argparse_messages()
    argparse._ = lambda message: table.get(message, message)


def _split_workspace_positional(argv: list[str], names: set[str]) -> tuple[list[str], str | None]:
    """`devtune DIR` opens the wizard on DIR: a first positional that is not a command is a workspace."""
    skip = False
    for i, arg in enumerate(argv):
        if skip:  # the value of the option before
            skip = False
            continue
        if arg.startswith("-"):
            skip = arg in ("-w", "--workspace", "--lang")
            continue
        if arg not in names:
            return argv[:i] + argv[i + 1:], arg
        break
    return argv, None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    lang = lang_from_argv(argv)
    if lang:
        os.environ["DEVTUNE_LANG"] = lang  # before build_parser(): the help texts are translated there
    _localize_argparse()
    parser, names = build_parser()
    argv, workspace_positional = _split_workspace_positional(argv, names)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said with the usage of the command it was given to, not the top level's
        owner = parser.commands.get(args.command) if args.command else None
        (owner or parser).error(_("unrecognized arguments: {args}", args=" ".join(unknown)))
    if workspace_positional is not None:
        if args.command:
            parser.error(_("unexpected argument {arg}", arg=repr(workspace_positional)))
        args.workspace = workspace_positional
    if args.lang:
        os.environ["DEVTUNE_LANG"] = args.lang
    handler = getattr(args, "handler", None)
    try:
        if handler is None:  # the wizard: it checks the settings after its first frame (tui/app.py)
            from cli.commands.wizard import run_wizard

            return int(run_wizard(args) or 0)
        from core.settings import current

        current()  # the DEVTUNE_* variables, checked once before any step: a wrong value is said here
        return int(handler(args) or 0)
    except DevtuneError as exc:  # the one place an error becomes an exit code (core/errors.py's table)
        print(f"devtune: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(_("interrupted"), file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `devtune ... | head`: the reader went away; nothing left to say.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
