"""The headless CLI: argument parsing, rendering (text, --json, progress) and exit codes; no Textual.
Each step's subcommands are in cli/commands/<step>.py; cli.main:main is the `devtune` entry point."""
