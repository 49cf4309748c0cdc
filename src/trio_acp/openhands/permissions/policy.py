"""Modes, permission options and "always" rules — pure, no trio, no SDK import.

The three modes are the OpenHands CLI's confirmation modes. An "always" answer becomes a
rule scoped to exactly what was asked: the tool, plus the command (terminal) or the path
(file editor) it touched. Rules live with the session (`rules.json` next to the SDK's
conversation files), so a reloaded session keeps them, and `/rules` lists and revokes them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import attrs

from trio_acp import schema
from trio_acp.openhands.permissions.modes import ALWAYS_APPROVE as ALWAYS_APPROVE
from trio_acp.openhands.permissions.modes import ALWAYS_ASK as ALWAYS_ASK
from trio_acp.openhands.permissions.modes import LLM_APPROVE as LLM_APPROVE
from trio_acp.openhands.permissions.modes import MODE_IDS as MODE_IDS
from trio_acp.openhands.permissions.modes import MODES as MODES
from trio_acp.openhands.sessions.small_files import loads_json
from trio_acp.openhands.translate.shapes import ToolArgs
from trio_acp.openhands.translate.tools import rule_scope

ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS = (
    "allow_once",
    "allow_always",
    "reject_once",
    "reject_always",
)


def mode_state(current: str) -> schema.SessionModeState:
    return schema.SessionModeState(
        current_mode_id=current,
        available_modes=[schema.SessionMode(id=i, name=n, description=d) for i, n, d in MODES],
    )


def mode_option(current: str) -> schema.SessionConfigOptionSelect:
    return schema.SessionConfigOptionSelect(
        id="mode",
        name="Approval mode",
        description="When the agent asks before acting.",
        category="mode",
        current_value=current,
        options=[
            schema.SessionConfigSelectOption(value=i, name=n, description=d) for i, n, d in MODES
        ],
    )


def permission_options(scope_label: str) -> list[schema.PermissionOption]:
    # The option ids are the kinds: unique, stable, and self-describing in logs.
    return [
        schema.PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind=ALLOW_ONCE),
        schema.PermissionOption(
            option_id=ALLOW_ALWAYS, name=f"Always allow {scope_label}", kind=ALLOW_ALWAYS
        ),
        schema.PermissionOption(option_id=REJECT_ONCE, name="Reject", kind=REJECT_ONCE),
        schema.PermissionOption(
            option_id=REJECT_ALWAYS, name=f"Always reject {scope_label}", kind=REJECT_ALWAYS
        ),
    ]


@attrs.frozen
class Scope:
    tool: str
    target: str | None  # the command or the absolute path; None = the whole tool

    def label(self) -> str:
        if self.target is None:
            return f"the {self.tool} tool"
        return f"`{self.target}`" if self.tool == "terminal" else f"{self.tool} on {self.target}"


def action_scope(tool_name: str, arguments: ToolArgs | None, cwd: str) -> Scope:
    """What an "always" answer about this call covers, as the tool catalog says: the
    command (terminal), the path (file editor, or any tool given a path), else the tool.
    A tool's legacy names (`bash`, `str_replace_editor`) share its rules."""
    tool, target = rule_scope(tool_name, arguments, cwd)
    return Scope(tool, target)


@attrs.frozen
class Rule:
    tool: str
    target: str | None
    allow: bool

    def matches(self, scope: Scope) -> bool:
        return self.tool == scope.tool and (self.target is None or self.target == scope.target)

    def describe(self) -> str:
        verb = "allow" if self.allow else "reject"
        return f"{verb} {Scope(self.tool, self.target).label()}"


class RuleBook:
    """The session's "always" rules, persisted as JSON when a path is given."""

    def __init__(
        self, path: Path | None = None, *, mask: Callable[[str], str] | None = None
    ) -> None:
        self.path = path
        # The agent's credentials are masked in the file (credentials.py): a rule naming
        # one then never matches after a reload, and the action is asked about again.
        self._mask = mask or (lambda text: text)
        self.rules: list[Rule] = []
        # What was wrong with the rules file, for `/rules` and `/status` to tell the user.
        self.problem: str | None = None
        if path is not None and os.path.lexists(path):
            try:
                data = loads_json(path.read_text(encoding="utf-8"))  # small_files.py
                self.rules = [
                    Rule(r["tool"], r.get("target"), bool(r["allow"])) for r in data["rules"]
                ]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                # A damaged rules file must not take the session down; asking again is
                # safe. It is set aside rather than overwritten by the next "always".
                self.rules = []
                self.problem = self._set_aside(path, exc)

    @staticmethod
    def _set_aside(path: Path, exc: Exception) -> str:
        reason = (
            exc.strerror
            if isinstance(exc, OSError) and exc.strerror
            else ("not valid JSON" if isinstance(exc, ValueError) else "not in the expected format")
        )
        aside = path.with_name(path.name + ".damaged")
        try:
            os.replace(path, aside)
        except OSError:
            return f"{path} could not be read ({reason}); no 'always' rules are in force"
        return (
            f"{path} could not be read ({reason}) and was moved to {aside.name}; "
            "no 'always' rules are in force until you answer 'always' again"
        )

    def match(self, scope: Scope) -> Rule | None:
        # Reject rules win over allow rules: fail closed when both apply.
        found = [r for r in self.rules if r.matches(scope)]
        for rule in found:
            if not rule.allow:
                return rule
        return found[0] if found else None

    def add(self, rule: Rule) -> None:
        if rule not in self.rules:
            self.rules.append(rule)
            self._save()

    def revoke(self, index: int) -> Rule:
        rule = self.rules.pop(index)
        self._save()
        return rule

    def clear(self) -> None:
        self.rules = []
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        text = json.dumps({"rules": [attrs.asdict(r) for r in self.rules]}, indent=2)
        tmp.write_text(self._mask(text), encoding="utf-8")
        os.replace(tmp, self.path)
        self.problem = None  # the rules in force are on disk again
