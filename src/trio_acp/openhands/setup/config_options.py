"""The `model` and `stream` session config options, as ACP objects (the mode option is in
`permissions.py`, with the modes).

`stream` is a boolean option: it goes only to clients that advertised
`clientCapabilities.session.configOptions.boolean` (a client that did not may not know
the type at all).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trio_acp import schema

if TYPE_CHECKING:
    from trio_acp.openhands.setup.models import ModelChoice


def client_takes_booleans(client: object) -> bool:
    caps = getattr(client, "capabilities", None)
    session = getattr(caps, "session", None)
    config = getattr(session, "config_options", None)
    return getattr(config, "boolean", None) is not None


def model_option(current: str, choices: list[ModelChoice]) -> schema.SessionConfigOptionSelect:
    options = [
        schema.SessionConfigSelectOption(value=c.id, name=c.name, description=c.description or None)
        for c in choices
    ]
    if not any(o.value == current for o in options):
        # The current model is always one of the values (the spec requires it).
        options.insert(0, schema.SessionConfigSelectOption(value=current, name=current))
    return schema.SessionConfigOptionSelect(
        id="model",
        name="Model",
        description="The model the agent calls: the configured default, LLM profiles, TRIO_ACP_MODELS",
        category="model",
        current_value=current,
        options=options,
    )


def stream_option(current: bool) -> schema.SessionConfigOptionBoolean:
    return schema.SessionConfigOptionBoolean(
        id="stream",
        name="Stream replies",
        description="Show the model's reply token by token (off: each reply arrives whole, "
        "for providers or proxies that mishandle streaming)",
        category="model_config",
        current_value=current,
    )
