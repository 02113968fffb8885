"""`devtune notify add|list|remove|test`: where word goes when a run finishes, fails or stalls, and when an eval
finds the tuned model worse than its base (core.notify). The run's supervisor sends it, so no devtune needs to be
open; docs/notifications.md says how to make each platform's robot."""

from __future__ import annotations

import sys

from core.errors import EXIT_OK
from core.i18n import _


def register(sub, add_common) -> list[str]:
    p = sub.add_parser("notify", help=_("send word to a webhook or a command when a run finishes, fails or stalls"),
                       description=_("Notification targets of this workspace (.devtune/notify.json): Feishu/Lark, "
                                     "DingTalk, WeCom and Slack robots, a generic JSON POST, or a command that "
                                     "reads the event's JSON on stdin. Events: finished, failed (with the "
                                     "diagnosis), stalled, eval-worse."))
    add_common(p)
    verbs = p.add_subparsers(dest="notify_command", metavar="ACTION", required=True)

    add = verbs.add_parser("add", help=_("add a webhook (or a command) to notify"),
                           description=_("Add a target. URL is the robot's webhook address (`-` reads it from "
                                         "stdin, so it stays out of the shell's history); with --format command, "
                                         "the command line to run instead."))
    add_common(add)
    add.add_argument("url", nargs="?", metavar="URL|COMMAND",
                     help=_("the webhook URL, `-` to read it from stdin, or the command (with --format command)"))
    add.add_argument("--format", required=True, choices=("feishu", "lark", "dingtalk", "wecom", "slack", "json",
                                                         "command"), help=_("what the receiver speaks"))
    add.add_argument("--name", help=_("a name for the target (default: the format)"))
    add.add_argument("--url-env", metavar="VAR",
                     help=_("read the URL from this environment variable when sending (nothing stored)"))
    add.add_argument("--secret-env", metavar="VAR",
                     help=_("the signing secret (Feishu/Lark signature verification, DingTalk signing) is in this variable"))
    add.add_argument("--secret-file", metavar="FILE",
                     help=_("the signing secret is in this file, readable by its owner only (chmod 600)"))
    add.add_argument("--events", metavar="LIST", default="finished,failed,stalled,eval-worse",
                     help=_("comma-separated events to send (default: all: finished,failed,stalled,eval-worse)"))
    add.add_argument("--json", action="store_true", help=_("print the target added as JSON"))
    add.set_defaults(handler=run_add)

    ls = verbs.add_parser("list", help=_("list the notify targets (URLs redacted)"))
    add_common(ls)
    ls.add_argument("--json", action="store_true", help=_('print {"targets": [...]}'))
    ls.set_defaults(handler=run_list)

    rm = verbs.add_parser("remove", help=_("remove a notify target"))
    add_common(rm)
    rm.add_argument("name", help=_("the target's name (`devtune notify list`)"))
    rm.set_defaults(handler=run_remove)

    test = verbs.add_parser("test", help=_("send a test notification to each target and say what arrived"),
                            description=_("Exit codes: 0 every target got it, 1 one did not, 2 no target."))
    add_common(test)
    test.add_argument("name", nargs="?", help=_("only this target"))
    test.add_argument("--json", action="store_true", help=_('print {"deliveries": [...]}'))
    test.set_defaults(handler=run_test)
    return ["notify"]


def run_add(args) -> int:
    import shlex
    from pathlib import Path

    from cli.commands.output import emit_json, workspace
    from core.errors import BadInput
    from core.notify.destinations import Target, add_target, default_name

    ws = workspace(args)
    url, command = None, None
    if args.format == "command":
        if not args.url:
            raise BadInput(_("give the command to run, e.g. `devtune notify add 'notify-send devtune' --format "
                             "command`"))
        command = shlex.split(args.url)
    elif args.url == "-":
        url = sys.stdin.readline().strip()
    else:
        url = args.url
    secret_file = str(Path(args.secret_file).expanduser().resolve()) if args.secret_file else None
    target = Target(name=args.name or default_name(ws, args.format), format=args.format, url=url or None,
                    url_env=args.url_env, secret_env=args.secret_env, secret_file=secret_file, command=command,
                    events=[e.strip() for e in args.events.split(",") if e.strip()])
    added = add_target(ws, target)
    if args.json:
        emit_json(added.public())
    else:
        print(_("added {name} ({fmt}) → {to}; `devtune notify test {name}` tries it", name=added.name,
                fmt=added.format, to=added.shown()))
    return EXIT_OK


def run_list(args) -> int:
    from cli.commands.output import emit_json, workspace
    from core.notify.destinations import load_targets

    targets = load_targets(workspace(args))
    if args.json:
        emit_json({"targets": [t.public() for t in targets]})
        return EXIT_OK
    if not targets:
        print(_("no notify targets; add one with `devtune notify add URL --format FORMAT`"))
    for t in targets:
        signed = " · " + _("signed") if t.secret_env or t.secret_file else ""
        print(f"{t.name}\t{t.format}\t{t.shown()}\t{','.join(t.events)}{signed}")
    return EXIT_OK


def run_remove(args) -> int:
    from cli.commands.output import workspace
    from core.notify.destinations import remove_target

    gone = remove_target(workspace(args), args.name)
    print(_("removed {name}", name=gone.name))
    return EXIT_OK


def run_test(args) -> int:
    from cli.commands.output import emit_json, workspace
    from core.errors import Failed
    from core.notify.run_events import send_test

    sent = send_test(workspace(args), args.name)
    if args.json:
        emit_json({"deliveries": [d.to_dict() for d in sent]})
    else:
        for delivery in sent:
            print(delivery.line())
    missed = [d.target for d in sent if not d.arrived]
    if missed:
        raise Failed(_("not delivered to {targets}; the lines above say why", targets=", ".join(missed)))
    return EXIT_OK
