"""Slash commands: `/help`, `/confirm`, `/condense`, `/status`, `/rules`.

A prompt whose text starts with one of these names is handled by the agent itself and
answered as an agent message; any other `/word` goes to the model as ordinary text.
"""

from __future__ import annotations

from typing import Any

import trio

from .. import schema
from .permissions import MODE_IDS, MODES

COMMANDS: list[tuple[str, str, str | None]] = [
    ("help", "List the commands trio-acp understands.", None),
    ("confirm", "Choose when the agent asks before acting.", " | ".join(MODE_IDS)),
    ("condense", "Summarize the conversation so far to free context now.", None),
    ("status", "Show the model, the approval mode, and tokens and cost so far.", None),
    ("rules", "List the 'always' permission rules, or revoke them.", "revoke N | clear"),
]
NAMES = {name for name, _, _ in COMMANDS}


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


def parse(blocks: list[Any]) -> tuple[str, str] | None:
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


async def run(session: Any, name: str, arg: str) -> str:
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
            return f"Current mode: `{session.mode}`. Choose one of:\n{modes}"
        await session.set_mode(arg, announce=True)
        return f"Approval mode is now `{arg}`."
    if name == "condense":
        before = len(session.conversation.state.events)
        try:
            await trio.to_thread.run_sync(session.conversation.condense, limiter=session.limiter)
        except Exception as exc:  # no condenser (ValueError), or the summary failed
            # A compaction the SDK's request opened is over: once that request is on the
            # wire, say how it ended.
            await session.flush_turn_updates()
            error = " ".join(str(exc).split())[:1000]
            for update in session.translator.end_compaction("failed", error):
                await session.send_update(update)
            return f"Could not condense: {exc}"
        after = len(session.conversation.state.events)
        return f"Conversation condensed ({after - before} new event(s) in the history)."
    if name == "status":
        return status_text(session)
    if name == "rules":
        return rules_text(session, arg)
    raise AssertionError(name)


def status_text(session: Any) -> str:
    lines = [f"- model: `{session.model}`", f"- approval mode: `{session.mode}`"]
    try:
        metrics = session.conversation.conversation_stats.get_combined_metrics()
        usage = metrics.accumulated_token_usage
        if usage is not None:
            lines.append(
                f"- tokens: {usage.prompt_tokens} prompt, {usage.completion_tokens} completion"
            )
        lines.append(f"- cost: ${metrics.accumulated_cost:.4f}")
    except Exception:
        lines.append("- tokens: unknown")
    lines.append(f"- always-rules: {len(session.rules.rules)}")
    return "Status:\n" + "\n".join(lines)


def rules_text(session: Any, arg: str) -> str:
    book = session.rules
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
        return "No 'always' rules yet. Answer a permission request with an 'always' option to add one."
    lines = [f"{i}. {rule.describe()}" for i, rule in enumerate(book.rules, 1)]
    return "Rules (revoke with `/rules revoke N`, or `/rules clear`):\n" + "\n".join(lines)
