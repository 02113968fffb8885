"""Who answers: each speaker of a transcript is an agent or a customer. In order, the first that decides:

1. the person's own choice (`--agent NAME`, `--customer NAME`);
2. the file: a role field (`role: agent`, `author.type: admin`, `发送者类型: 客服`, `incoming: true`,
   `IsSender: 1`) or a side-loaded user's role;
3. the name: agent-like words (客服, 售后, 官方, support, agent, team, bot…) or customer-like ones (访客, 客户,
   visitor, customer…);
4. the conversations: the one speaker found in every conversation (two or more) answers; an id shaped like
   a known agent's (`liuyang`, `chenjing` beside `wmAbC123…`) is an agent too;
5. within a conversation: beside a known agent the others are customers, beside a known customer the one
   unknown speaker answers; else the first to speak asks.
`Roles.evidence` says which rule decided each speaker, for the detection summary."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from core.data.transcripts.messages import AGENT, CUSTOMER, Message

AGENT_NAME = re.compile(r"客服|售后|售前|坐席|官方|助手|人工|服务|support|agent|service|help ?desk|\bteam\b|\badmin\b"
                        r"|staff|operator|机器人|\bbot\b", re.IGNORECASE)
CUSTOMER_NAME = re.compile(r"访客|客户|顾客|买家|游客|visitor|customer|guest|\bclient\b", re.IGNORECASE)
AGENT_VALUE = re.compile(r"^(?:agent|admin|administrator|staff|operator|support|teammate|assistant|bot|客服|坐席|商家"
                         r"|卖家|机器人|seller|service_agent)s?$", re.IGNORECASE)
CUSTOMER_VALUE = re.compile(r"^(?:user|end-user|end_user|enduser|customer|visitor|contact|lead|client|requester"
                            r"|guest|客户|访客|用户|买家|顾客)s?$", re.IGNORECASE)
SYSTEM_VALUE = re.compile(r"^(?:system|service|notice|event|系统|通知)|system", re.IGNORECASE)
INCOMING_KEY = re.compile(r"incoming|inbound|from_customer|is_customer", re.IGNORECASE)
OUTGOING_KEY = re.compile(r"is_?sender|from_?me|outgoing|outbound|is_agent|by_agent", re.IGNORECASE)


def role_of_value(key: str, value) -> str:
    """agent / customer / system, or '' for a field value that says nothing of the kind."""
    if isinstance(value, bool) or (isinstance(value, (int, str)) and str(value) in ("0", "1")):
        on = value is True or str(value) == "1"
        if INCOMING_KEY.search(key):
            return CUSTOMER if on else AGENT
        if OUTGOING_KEY.search(key):
            return AGENT if on else CUSTOMER
        return ""
    if not isinstance(value, str):
        return ""
    v = value.strip()
    if AGENT_VALUE.match(v):
        return AGENT
    if CUSTOMER_VALUE.match(v):
        return CUSTOMER
    return "system" if SYSTEM_VALUE.search(v) else ""


@dataclass
class Roles:
    of: dict[str, str] = field(default_factory=dict)         # speaker → agent / customer
    evidence: dict[str, str] = field(default_factory=dict)   # speaker → the rule that decided

    def agents(self) -> list[str]:
        return sorted(s for s, r in self.of.items() if r == AGENT)

    def customers(self) -> list[str]:
        return sorted(s for s, r in self.of.items() if r == CUSTOMER)


def _id_shape(name: str) -> str | None:
    if len(name) < 6 or not name.isascii() or " " in name:
        return None
    shape = re.sub(r"[a-z]+", "a", re.sub(r"[A-Z]+", "A", re.sub(r"\d+", "9", name)))
    return shape


def assign_roles(conversations: list[list[Message]], agents: list[str] | tuple = (),
                 customers: list[str] | tuple = ()) -> Roles:
    roles = Roles()
    conversations = [[m for m in c if m.speaker and m.text and not m.notice and not m.hidden] for c in conversations]
    speakers = Counter(m.speaker for c in conversations for m in c)

    def decide(who: str, role: str, why: str) -> None:
        if who not in roles.of:
            roles.of[who], roles.evidence[who] = role, why

    for who in agents:
        decide(who, AGENT, "--agent")
    for who in customers:
        decide(who, CUSTOMER, "--customer")
    said: dict[str, Counter] = {}
    for c in conversations:
        for m in c:
            if m.role and m.speaker:
                said.setdefault(m.speaker, Counter())[m.role] += 1
    for who, votes in said.items():
        decide(who, votes.most_common(1)[0][0], "the file's role field")
    for who in speakers:
        if AGENT_NAME.search(who):
            decide(who, AGENT, "an agent-like name")
        elif CUSTOMER_NAME.search(who):
            decide(who, CUSTOMER, "a customer-like name")
    present = [{m.speaker for m in c if not m.notice and m.speaker} for c in conversations]
    present = [p for p in present if p]
    if len(present) >= 2:
        everywhere = set.intersection(*present)
        if everywhere and len(everywhere) < len(speakers):
            for who in everywhere:
                decide(who, AGENT, "in every conversation")
    known_shapes = {role: {_id_shape(w) for w, r in roles.of.items() if r == role} - {None} for role in (AGENT, CUSTOMER)}
    for who in speakers:
        shape = _id_shape(who)
        hits = [role for role, shapes in known_shapes.items() if shape and shape in shapes]
        if len(hits) == 1:
            decide(who, hits[0], "an id shaped like a known " + hits[0] + "'s")
    for c in conversations:
        here = [w for w in dict.fromkeys(m.speaker for m in c if not m.notice and m.speaker)]
        unknown = [w for w in here if w not in roles.of]
        if not unknown:
            continue
        if any(roles.of.get(w) == AGENT for w in here):
            for w in unknown:
                decide(w, CUSTOMER, "beside a known agent")
        elif any(roles.of.get(w) == CUSTOMER for w in here) and len(unknown) == 1:
            decide(unknown[0], AGENT, "answers a known customer")
        else:
            asks = unknown[0]
            decide(asks, CUSTOMER, "speaks first")
            for w in unknown[1:]:
                decide(w, AGENT, "answers the first speaker")
    return roles
