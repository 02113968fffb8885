"""Word when it matters: a notification when a run finishes, fails, stalls, or when an eval finds the tuned model
worse than its base, sent to the webhooks teams read (Feishu/Lark, DingTalk, WeCom, Slack, a generic JSON POST) or
to a command.

    events     NotifyEvent: what happened (kind, run, config, duration, last loss, the diagnosis's cause and fix)
    formats    the request body (and signed query) each platform's robot takes, from its official docs
    destinations where to send: .devtune/notify.json (written 0600, atomically), the secrets read from an
               environment variable or a 0600 file when a send needs them
    redact     a URL or a text with its secrets (query tokens, path keys, signing secrets) masked
    send       delivery: httpx, bounded retries with exponential back-off on network errors, 5xx and 429; a
               command gets the event's JSON on stdin; each outcome recorded as a line of notify.jsonl
    run_events the events of a run (the supervisor sends finished / failed / stalled) and of an eval

Nothing here raises into the caller that sends: a run's end is recorded whatever a webhook does.
"""
