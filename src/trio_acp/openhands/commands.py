"""Slash commands: `/help`, `/confirm`, `/condense`, `/status`, `/rules`, `/skills`.

A prompt whose text starts with one of these names is handled by the agent itself and
answered as an agent message; any other `/word` goes to the model as ordinary text.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

import trio

from .. import schema
from .errors import SEE_LOG, describe
from .permissions import MODE_IDS, MODES

log = logging.getLogger(__name__)

COMMANDS: list[tuple[str, str, str | None]] = [
    ("help", "List the commands trio-acp understands.", None),
    ("confirm", "Choose when the agent asks before acting.", " | ".join(MODE_IDS)),
    ("condense", "Summarize the conversation so far to free context now.", None),
    ("status", "Show the model, the approval mode, and tokens and cost so far.", None),
    ("rules", "List the 'always' permission rules, or revoke them.", "revoke N | clear"),
    ("skills", "List the skills and project context (AGENTS.md, .openhands/) this session loaded.", None),
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
        return await condense(session)
    if name == "status":
        return status_text(session)
    if name == "rules":
        return rules_text(session, arg)
    if name == "skills":
        return skills_text(session.conversation.agent)
    raise AssertionError(name)


def skills_text(agent: Any) -> str:
    """The skills in the agent's context: always-on ones, then those a keyword triggers."""
    context = getattr(agent, "agent_context", None)
    skills = list(getattr(context, "skills", None) or [])
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
            triggered.append(f"- `{skill.name}` ({getattr(skill.trigger, 'type', 'triggered')}){source}")
    lines = []
    if always:
        lines += ["Always in context:", *always]
    if triggered:
        lines += ["Loaded when the prompt mentions them:", *triggered]
    return "\n".join(lines)


async def condense(session: Any) -> str:
    conv = session.conversation

    def has_history() -> bool:
        # Only the system prompt so far: the SDK would record a condensation request it
        # cannot serve, and the next prompt would pay for it. Nothing to do, say so.
        return any(type(e).__name__ != "SystemPromptEvent" for e in conv.state.view.events)

    if not await trio.to_thread.run_sync(has_history, limiter=session.limiter):
        return "Nothing to condense yet: the conversation has no messages. `/condense` summarizes the history once there is some."
    before = len(conv.state.events)
    error, logged = await trio.to_thread.run_sync(_condense_now, conv, limiter=session.limiter)
    if error is not None:
        reason = _condense_failure(session.sdk, error, logged)
        # A compaction the SDK's request opened is over: once that request is on the
        # wire, say how it ended.
        await session.flush_turn_updates()
        for update in session.translator.end_compaction("failed", " ".join(reason.split())[:1000]):
            await session.send_update(update)
        return f"Could not condense: {reason}"
    after = len(conv.state.events)
    return f"Conversation condensed ({after - before} new event(s) in the history)."


class _ThreadWarnings(logging.Handler):
    """Warnings logged by the calling thread (the condenser's logger is shared by sessions)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.messages.append(record.getMessage())


def _condense_now(conv: Any) -> tuple[Exception | None, list[str]]:
    # When the summary's model call fails, the SDK logs why and raises without it
    # ("Unable to compute forgotten events"): the log is where the reason is.
    seen = _ThreadWarnings()
    logger = logging.getLogger(CONDENSER_LOGGER)
    events = conv.state.events
    head = events[-1].id if len(events) else None
    logger.addHandler(seen)
    try:
        conv.condense()
        return None, seen.messages
    except Exception as exc:
        _forget_request(conv, head)
        return exc, seen.messages
    finally:
        logger.removeHandler(seen)


def _forget_request(conv: Any, head: Any) -> None:
    """Put the conversation back where it was before a failed /condense.

    The SDK keeps the condensation request it could not serve, and the next turn serves
    it first — with the user's new message inside the summary, not answered. Moving the
    conversation's head back leaves the request on an abandoned branch (still on disk,
    out of the model's view).
    """
    if head is None:
        return
    try:
        conv.navigate_to(head)
    except Exception:
        log.warning("could not drop the failed condensation request", exc_info=True)


CONDENSER_LOGGER = "openhands.sdk.context.condenser"
_LLM_FAILED = re.compile(r"LLM call failed: (.*?)(?:\. Reducing max event size.*)?$", re.S)


def _condense_failure(sdk: Any, exc: Exception, logged: list[str]) -> str:
    unchanged = "The history is unchanged"
    if isinstance(exc, ValueError) and "condenser" in str(exc).lower():
        # The SDK's text goes on with a Python snippet meant for SDK users.
        return f"{str(exc).splitlines()[0]} {unchanged}."
    if isinstance(exc, getattr(sdk, "NoCondensationAvailableException", ())):
        for text in [str(exc), *reversed(logged)]:
            found = _LLM_FAILED.search(text)
            if found:
                reason = " ".join(found.group(1).split())[:300]
                return f"the model call that writes the summary failed ({reason}). {unchanged}."
        return f"no summary could be written ({describe(exc)}). {unchanged}."
    return f"{describe(exc)}. {unchanged}. ({SEE_LOG})"


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
    if session.rules.problem:
        lines.append(f"- rules file: {session.rules.problem}")
    return "Status:\n" + "\n".join(lines)


def rules_text(session: Any, arg: str) -> str:
    book = session.rules
    note = f"\n\nNote: {book.problem}." if book.problem else ""
    return _rules_text(book, arg) + note


def _rules_text(book: Any, arg: str) -> str:
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
