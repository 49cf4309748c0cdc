"""The models a session can switch between: everything the user has configured.

Three sources, in this order (the first id wins when two agree):

1. The default model: `agent_settings.json` and `LLM_*` (see `settings.py`). Its id is
   its model name, e.g. `anthropic/claude-sonnet-4-5`.
2. LLM profiles, the SDK's `LLMProfileStore` files: `<persistence dir>/profiles/<name>.json`
   (`~/.openhands/profiles/` by default), each one complete LLM configuration. Their id is
   `profile:<name>`; they are used as saved (the SDK resolves a linked provider
   connection's key when one is loaded).
3. `TRIO_ACP_MODELS`: a comma-separated list of model names, or a JSON list whose items
   are model names or objects `{"model", "id"?, "name"?, "base_url"?, "api_key_env"?,
   "api_key"?, ...any other LLM field}`. An entry's id is its `id`, else its model name.

An entry of `TRIO_ACP_MODELS` inherits the default model's fields (retries, timeouts,
credentials ...) except those that describe one model (`MODEL_SPECIFIC`). Credentials
are inherited as a group or not at all: an entry that names any of `CREDENTIAL_FIELDS`
(or `api_key_env`, the name of the environment variable holding its key) gets none of
the default's, so a key is never sent to an endpoint it was not configured for.

Pure: reads files and the environment, never imports the SDK or Trio.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

import attrs

from trio_acp.openhands.sessions.small_files import loads_json
from trio_acp.openhands.setup.settings import LlmFields, Settings, SettingsError

log = logging.getLogger(__name__)

MODELS_VARIABLE = "TRIO_ACP_MODELS"
PROFILES_DIR = "profiles"
PROFILE_PREFIX = "profile:"
# The SDK's rule for profile names (openhands/sdk/llm/llm_profile_store.py).
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

# Fields about one model rather than the connection: never inherited by another model.
MODEL_SPECIFIC = frozenset(
    {
        "model",
        "model_canonical_name",
        "capability_overrides",
        "reasoning_effort",
        "max_input_tokens",
        "max_output_tokens",
        "input_cost_per_token",
        "output_cost_per_token",
        "custom_tokenizer",
        "usage_id",
    }
)
# Where requests go and who pays: inherited together or not at all.
CREDENTIAL_FIELDS = frozenset(
    {
        "api_key",
        "base_url",
        "api_version",
        "provider_connection_id",
        "auth_type",
        "subscription_vendor",
        "ollama_base_url",
        "extra_headers",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "aws_region_name",
        "aws_profile_name",
        "aws_role_name",
        "aws_session_name",
        "aws_bedrock_runtime_endpoint",
    }
)
# Keys of a TRIO_ACP_MODELS object that are ours, not LLM fields.
_ENTRY_KEYS = frozenset({"id", "name", "description", "api_key_env"})


@attrs.frozen
class ModelChoice:
    """One value of the `model` config option."""

    id: str
    name: str
    description: str
    # LLM fields (the default model, TRIO_ACP_MODELS entries); None for a profile.
    fields: LlmFields | None = attrs.field(default=None, repr=False)
    # The profile store directory and the profile's name, for a profile.
    profile_dir: Path | None = None
    profile: str | None = None
    # The environment variable holding this entry's key (read when the model is chosen).
    api_key_env: str | None = None

    def llm_fields(self, env: Mapping[str, str] | None = None) -> LlmFields:
        """The LLM fields of a non-profile choice; raises SettingsError if its key is missing."""
        assert self.fields is not None
        fields = dict(self.fields)
        if self.api_key_env:
            env = os.environ if env is None else env
            key = env.get(self.api_key_env)
            if not key:
                raise SettingsError(
                    f"model {self.id!r} takes its API key from ${self.api_key_env}, which is not set"
                )
            fields["api_key"] = key
        return fields


def model_choices(settings: Settings, env: Mapping[str, str] | None = None) -> list[ModelChoice]:
    """Every configured model, the default first. Raises SettingsError for a bad TRIO_ACP_MODELS."""
    env = os.environ if env is None else env
    if settings.llm is None:
        return []
    default_id = str(settings.llm["model"])
    choices = [
        ModelChoice(
            id=default_id,
            name=default_id,
            description=f"The default model ({_sources(settings)})",
            fields=dict(settings.llm),
        )
    ]
    choices += _profiles(settings.persistence_dir / PROFILES_DIR)
    choices += _listed(env.get(MODELS_VARIABLE, ""), settings.llm)
    unique: dict[str, ModelChoice] = {}
    for choice in choices:
        if choice.id in unique:
            log.warning("model id %r is configured twice; keeping the first", choice.id)
            continue
        unique[choice.id] = choice
    return list(unique.values())


def _sources(settings: Settings) -> str:
    where = {settings.sources.get("model", "")}
    return ", ".join(sorted(w for w in where if w)) or "settings"


def _profiles(directory: Path) -> list[ModelChoice]:
    """The profiles in `directory`, read without the SDK (display only: name and model)."""
    out: list[ModelChoice] = []
    try:
        paths = sorted(directory.glob("*.json"))
    except OSError:
        return out
    for path in paths:
        name = path.stem
        if not _PROFILE_NAME.match(name):
            continue
        try:
            data = loads_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            log.warning("skipping the unreadable LLM profile %s", path)
            continue
        model = data.get("model") if isinstance(data, dict) else None
        if not isinstance(model, str) or not model:
            log.warning("skipping the LLM profile %s: it names no model", path)
            continue
        out.append(
            ModelChoice(
                id=PROFILE_PREFIX + name,
                name=f"{name} ({model})",
                description=f"LLM profile {path}",
                profile_dir=directory,
                profile=name,
            )
        )
    return out


def _listed(raw: str, default: LlmFields) -> list[ModelChoice]:
    raw = raw.strip()
    if not raw:
        return []
    if raw.startswith("["):
        try:
            items = loads_json(raw)
        except ValueError as exc:
            raise SettingsError(f"{MODELS_VARIABLE} is not valid JSON: {exc}") from None
    else:
        items = [part.strip() for part in raw.split(",") if part.strip()]
    out = []
    for index, item in enumerate(items):
        where = f"{MODELS_VARIABLE}[{index}]"
        if isinstance(item, str) and item.strip():
            item = {"model": item.strip()}
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("model"), str)
            or not item["model"].strip()
        ):
            raise SettingsError(f'{where} must be a model name or an object with a "model" name')
        for key in ("id", "name", "description", "api_key_env"):
            if key in item and not (isinstance(item[key], str) and item[key].strip()):
                raise SettingsError(f"{where}.{key} must be a non-empty string")
        own = {k: v for k, v in item.items() if k not in _ENTRY_KEYS}
        own_credentials = "api_key_env" in item or bool(CREDENTIAL_FIELDS & own.keys())
        inherited = {
            k: v
            for k, v in default.items()
            if k not in MODEL_SPECIFIC and not (own_credentials and k in CREDENTIAL_FIELDS)
        }
        model = own["model"].strip()
        out.append(
            ModelChoice(
                id=item.get("id", model),
                name=item.get("name", model),
                description=item.get("description")
                or (
                    f"From {MODELS_VARIABLE}"
                    + ("" if own_credentials else ", with the default model's connection")
                ),
                fields={**inherited, **own, "model": model},
                api_key_env=item.get("api_key_env"),
            )
        )
    return out
