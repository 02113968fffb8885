"""Chat transcripts as tools export them (WeChat, WeCom, QQ, DingTalk, Feishu, WhatsApp, Telegram, LINE,
helpdesk JSON/CSV), read by the shape learned from the file: `detect` (is it one, what is in it),
`text_shape` and `record_shape` (the messages), `roles` (who answers), `conversations` (units for convert),
`noise` (placeholders and notices), `stamps` (timestamps)."""
