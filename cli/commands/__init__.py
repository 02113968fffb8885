"""One module per step's headless commands. Each exposes `register(subparsers, add_common)`,
which adds its subcommands using argparse only and returns their names; handlers import core
services when they run, so `devtune --help` stays fast."""

COMMAND_MODULES = (
    "demo",
    "data",
    "doctor",
    "config",
    "train",
    "merge",
    "serve",
    "eval",
    "diagnose",
    "notify",
)
