"""Scripts as JSON files: scenarios, rules and a default, for the server's ``--scenarios`` option."""

from __future__ import annotations

import json
import os
import re
import string
from collections.abc import Mapping
from typing import Any

import attrs

from trio_acp.testing.script import (
    Pattern,
    Reply,
    RequestContext,
    Scenario,
    ScenarioRef,
    Step,
    ToolCall,
)

__all__ = ["ScriptFile", "load_script_file"]


def _template_reply(raw: Mapping[str, Any]) -> Step:
    """A step from a JSON reply dict; ``${prompt}``, ``${step}`` and ``${<tag>}`` are substituted."""
    reply = Reply(**raw)

    def subst(value: Any, mapping: Mapping[str, str]) -> Any:
        if isinstance(value, str):
            return string.Template(value).safe_substitute(mapping)
        if isinstance(value, Mapping):
            return {k: subst(v, mapping) for k, v in value.items()}
        if isinstance(value, list):
            return [subst(v, mapping) for v in value]
        return value

    def render(ctx: RequestContext) -> Reply:
        mapping = {**ctx.tags, "prompt": ctx.prompt, "step": str(ctx.step)}
        return attrs.evolve(
            reply,
            text=subst(reply.text, mapping),
            reasoning=subst(reply.reasoning, mapping),
            tool_calls=[
                ToolCall(tc.name, subst(tc.arguments, mapping), tc.id) for tc in reply.tool_calls
            ],
        )

    return render


@attrs.frozen
class ScriptFile:
    """The scenarios, rules and default scenario of a JSON script file."""

    scenarios: dict[str, Scenario]
    rules: list[tuple[Pattern, ScenarioRef]]
    default: str | None


def load_script_file(path: str | os.PathLike[str]) -> ScriptFile:
    """Load scenarios and rules from JSON::

        {"default": "echo",
         "scenarios": {"greet": [{"text": "Hi ${name}!"},
                                 {"tool_calls": [{"name": "finish", "arguments": {"message": "bye"}}]}]},
         "rules": [{"match": "hello", "scenario": "greet"}, {"regex": "^bye\\\\b", "scenario": "echo"}]}

    Reply dicts take the :class:`~.script.Reply` fields.  Strings in replies may use ``${prompt}``, ``${step}``
    and ``${TAG}`` for any ``[TAG:value]`` of the prompt.
    """
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    scenarios = {
        name: Scenario(name, [_template_reply(r) for r in replies])
        for name, replies in (data.get("scenarios") or {}).items()
    }
    rules: list[tuple[Pattern, ScenarioRef]] = []
    for rule in data.get("rules") or []:
        pattern: Pattern
        if "regex" in rule:
            pattern = re.compile(rule["regex"])
        else:
            pattern = rule["match"]
        rules.append((pattern, rule["scenario"]))
    return ScriptFile(scenarios=scenarios, rules=rules, default=data.get("default"))
