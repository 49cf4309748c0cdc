"""Slash commands: `/help`, `/confirm`, `/condense`, `/status`, `/rules`, `/skills`.

A prompt whose text starts with one of these names is handled by the agent itself and
answered as an agent message; any other `/word` goes to the model as ordinary text.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from trio_acp import schema
from trio_acp.openhands.permissions.policy import MODE_IDS, MODES, RuleBook

if TYPE_CHECKING:
    from trio_acp.openhands.backends.conversation import Conversation
    from trio_acp.openhands.sdk.classes import Skill
    from trio_acp.openhands.sessions.options import SessionOptions
    from trio_acp.openhands.sessions.outbox import Outbox

log = logging.getLogger(__name__)

COMMANDS: list[tuple[str, str, str | None]] = [
    ("help", "List the commands trio-acp understands.", None),
    ("confirm", "Choose when the agent asks before acting.", " | ".join(MODE_IDS)),
    ("condense", "Summarize the conversation so far to free context now.", None),
    ("status", "Show the model, the approval mode, and tokens and cost so far.", None),
    ("rules", "List the 'always' permission rules, or revoke them.", "revoke N | clear"),
    (
        "skills",
        "List the skills and project context (AGENTS.md, .openhands/) this session loaded.",
        None,
    ),
]
NAMES = {name for name, _, _ in COMMANDS}


class CommandHost(Protocol):
    """What the slash commands use of their session (nothing else of it)."""

    @property
    def options(self) -> SessionOptions: ...

    @property
    def model(self) -> str: ...

    @property
    def rules(self) -> RuleBook: ...

    @property
    def conversation(self) -> Conversation | None: ...

    @property
    def outbox(self) -> Outbox: ...

    async def send_update(self, update: schema.SessionUpdate) -> None: ...


def available_commands() -> schema.AvailableCommandsUpdate:
    return schema.AvailableCommandsUpdate(
        available_commands=[
            schema.AvailableCommand(
                name=name,
                description=description,
                input=schema.UnstructuredCommandInput(hint=hint) if hint else None,
            )
            for name, description, hint in COMMANDS
        ]
    )


def parse(blocks: Sequence[schema.ContentBlock]) -> tuple[str, str] | None:
    """(command, argument text) when the prompt is one of our slash commands."""
    texts = [b.text for b in blocks if isinstance(b, schema.TextContent)]
    if len(texts) != 1 or len(texts) != len(blocks):
        return None
    text = texts[0].strip()
    if not text.startswith("/"):
        return None
    name, _, rest = text[1:].partition(" ")
    if name not in NAMES:
        return None
    return name, rest.strip()


async def execute(session: CommandHost, name: str, arg: str) -> str:
    """Run a command; returns the text to show the user (Markdown)."""
    if name == "help":
        lines = ["Commands:"]
        for cmd, description, hint in COMMANDS:
            lines.append(f"- `/{cmd}{' ' + hint if hint else ''}` — {description}")
        lines.append("Anything else starting with `/` goes to the model as ordinary text.")
        return "\n".join(lines)
    if name == "confirm":
        if arg not in MODE_IDS:
            modes = "\n".join(f"- `{i}` — {d}" for i, _, d in MODES)
            return f"Current mode: `{session.options.mode}`. Choose one of:\n{modes}"
        await session.options.set_mode(arg, announce=True)
        return f"Approval mode is now `{arg}`."
    if name == "condense":
        return await condense(session)
    if name == "status":
        return status_text(session)
    if name == "rules":
        return rules_text(session, arg)
    if name == "skills":
        return skills_text(
            session.conversation.skills() if session.conversation is not None else []
        )
    raise AssertionError(name)


def skills_text(skills: list[Skill]) -> str:
    """The skills in the agent's context: always-on ones, then those a keyword triggers."""
    if not skills:
        return (
            "No skills are loaded. The agent reads `AGENTS.md` and `.agents/skills/`, "
            "`.openhands/skills/` in the project (and its git root), and the user's "
            "`~/.openhands/skills/`."
        )
    always, triggered = [], []
    for skill in sorted(skills, key=lambda s: s.name):
        source = f" — `{skill.source}`" if getattr(skill, "source", None) else ""
        keywords = list(getattr(skill.trigger, "keywords", None) or [])
        if skill.trigger is None:
            always.append(f"- `{skill.name}`{source}")
        elif keywords:
            triggered.append(f"- `{skill.name}` (on: {', '.join(keywords)}){source}")
        else:
            triggered.append(
                f"- `{skill.name}` ({getattr(skill.trigger, 'type', 'triggered')}){source}"
            )
    lines = []
    if always:
        lines += ["Always in context:", *always]
    if triggered:
        lines += ["Loaded when the prompt mentions them:", *triggered]
    return "\n".join(lines)


async def condense(session: CommandHost) -> str:
    assert session.conversation is not None
    result = await session.conversation.condense()
    if result.empty:
        return "Nothing to condense yet: the conversation has no messages. `/condense` summarizes the history once there is some."
    if result.failure is not None:
        reason = result.failure
        # A compaction the SDK's request opened is over: once that request is on the
        # wire, say how it ended.
        await session.outbox.flush()
        for update in session.outbox.end_compaction("failed", " ".join(reason.split())[:1000]):
            await session.send_update(update)
        return f"Could not condense: {reason}"
    return f"Conversation condensed ({result.added} new event(s) in the history)."


def status_text(session: CommandHost) -> str:
    lines = [f"- model: `{session.model}`", f"- approval mode: `{session.options.mode}`"]
    usage = session.conversation.usage() if session.conversation is not None else None
    if usage is None:
        lines.append("- tokens: unknown")
    else:
        if usage.prompt_tokens is not None:
            lines.append(
                f"- tokens: {usage.prompt_tokens} prompt, {usage.completion_tokens} completion"
            )
        lines.append(f"- cost: ${usage.cost or 0:.4f}")
    # Only a conversation on an agent-server says where it runs (remote_conversation.py).
    location = getattr(session.conversation, "location", None)
    if location:
        lines.append(f"- runs on: {location}")
    lines.append(f"- always-rules: {len(session.rules.rules)}")
    if session.rules.problem:
        lines.append(f"- rules file: {session.rules.problem}")
    return "Status:\n" + "\n".join(lines)


def rules_text(session: CommandHost, arg: str) -> str:
    book = session.rules
    note = f"\n\nNote: {book.problem}." if book.problem else ""
    return _rules_text(book, arg) + note


def _rules_text(book: RuleBook, arg: str) -> str:
    words = arg.split()
    if words[:1] == ["clear"]:
        count = len(book.rules)
        book.clear()
        return f"Revoked all {count} rule(s)."
    if words[:1] == ["revoke"]:
        try:
            index = int(words[1]) - 1
            if index < 0:
                raise IndexError
            rule = book.revoke(index)
        except (IndexError, ValueError):
            return f"Usage: `/rules revoke N` with N between 1 and {len(book.rules)}."
        return f"Revoked: {rule.describe()}."
    if not book.rules:
        return (
            "No 'always' rules yet. Answer a permission request with an 'always' option to add one."
        )
    lines = [f"{i}. {rule.describe()}" for i, rule in enumerate(book.rules, 1)]
    return "Rules (revoke with `/rules revoke N`, or `/rules clear`):\n" + "\n".join(lines)
