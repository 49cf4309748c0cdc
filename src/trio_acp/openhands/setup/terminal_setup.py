"""`trio-acp --setup`: configure the model interactively, on a terminal.

This is what ACP's terminal authentication method runs: an editor that advertised
`clientCapabilities.auth.terminal` re-launches the agent's command with the method's
`args` (`--setup`) in a terminal it shows the user. It asks for the model, the base URL
and the API key (typed without echo), writes them to `agent_settings.json` in the
persistence directory the way the OpenHands CLI does, and exits 0 on success (the
client's success signal), 1 when nothing was saved.

The file has the CLI's shape, a serialized SDK `Agent` whose `llm` holds the model, key
and base URL (secrets in clear, as the CLI writes them), and owner-only mode 0600. An
existing file is updated in place: only the model, key and base URL of its `llm` (and of
its condenser's LLM, which the CLI keeps in step) change, everything else stays. A new
file's `Agent` is built by the SDK, imported in the background while the user types.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from trio_acp.openhands.sessions.small_files import loads_json
from trio_acp.openhands.setup.settings import (
    SETTINGS_FILE,
    LlmFields,
    SettingsError,
    load_settings,
    persistence_dir,
)
from trio_acp.openhands.translate.shapes import JsonObject

if TYPE_CHECKING:
    from trio_acp.openhands.sdk import SdkLoader
    from trio_acp.openhands.sdk.loaded import Sdk

SETUP_ARG = "--setup"


class _Abort(Exception):
    pass


def run_setup(env: dict[str, str] | None = None, *, out: TextIO | None = None) -> int:
    """Ask, write the settings file, return the exit status."""
    env = dict(os.environ if env is None else env)
    out = out or sys.stdout
    try:
        pdir = load_settings(env).persistence_dir
    except SettingsError:
        try:
            pdir = persistence_dir(env)
        except SettingsError as exc:
            print(f"trio-acp setup: {exc}", file=sys.stderr)
            return 2
    path = pdir / SETTINGS_FILE
    loader = None
    try:
        existing = _read_existing(path, out)
        if not isinstance(existing.get("llm"), dict):
            from trio_acp.openhands.sdk import SdkLoader

            loader = SdkLoader()  # a new file needs the SDK's Agent: import while the user types
        found = existing.get("llm")
        llm: LlmFields = found if isinstance(found, dict) else {}
        _say(out, f"Configure the model trio-acp (OpenHands) uses. It is saved to {path}.")
        _say(out, "Press Enter to keep a value shown in [brackets]; Ctrl-C to quit without saving.")
        model = _ask(
            out,
            "Model (a litellm name such as anthropic/claude-sonnet-4-5 or openai/gpt-5)",
            llm.get("model"),
        )
        base_url = _ask(
            out,
            "Base URL (only for an OpenAI-compatible server; '-' for the provider's default)",
            llm.get("base_url"),
            required=False,
        )
        if base_url == "-":
            base_url = ""
        has_key = bool(llm.get("api_key"))
        prompt = "API key (not shown as you type" + (
            "; Enter keeps the saved key): " if has_key else "): "
        )
        api_key = getpass.getpass(prompt, stream=out).strip()
        if not api_key and not has_key:
            _say(
                out,
                "No API key given: the provider's own environment variable (e.g. OPENAI_API_KEY) will be used, if set.",
            )
    except (_Abort, EOFError, KeyboardInterrupt):
        _say(out, "\nNothing was saved.")
        return 1

    fields = {"model": model, "base_url": base_url or None}
    if api_key:
        fields["api_key"] = api_key
    try:
        if loader is None:
            data = _updated(existing, fields)
        else:
            sdk = _wait_for_sdk(loader, out)
            data = _new_agent(sdk, fields)
        pdir.mkdir(parents=True, exist_ok=True)
        write_private(path, json.dumps(data, indent=2))
    except Exception as exc:
        _say(
            out,
            f"Could not save the settings: {' '.join(str(exc).split())[:500]}\nNothing was saved.",
        )
        return 1
    _say(out, f"Saved: {model}" + (f" at {base_url}" if base_url else "") + f", in {path}.")
    _say(out, "You can close this terminal and go back to your editor.")
    return 0


def _say(out: TextIO, text: str) -> None:
    out.write(text + "\n")
    out.flush()


def _ask(out: TextIO, label: str, current: object, *, required: bool = True) -> str:
    shown = f" [{current}]" if current else ""
    while True:
        out.write(f"{label}{shown}: ")
        out.flush()
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        answer = line.strip()
        if answer:
            return answer
        if current:
            return str(current)
        if not required:
            return ""
        _say(out, "A value is required.")


def _read_existing(path: Path, out: TextIO) -> JsonObject:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = loads_json(text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        backup = path.with_name(path.name + ".bak")
        os.replace(path, backup)
        _say(out, f"{path} could not be read ({exc}); it was moved to {backup}.")
        return {}
    return data


def _wait_for_sdk(loader: SdkLoader, out: TextIO) -> Sdk:
    import trio

    if not loader.ready:
        _say(out, "Loading OpenHands ...")
    return trio.run(loader.get)


def _updated(data: JsonObject, fields: LlmFields) -> JsonObject:
    out = dict(data)
    out["llm"] = _with(data["llm"], fields)
    condenser = data.get("condenser")
    if isinstance(condenser, dict) and isinstance(condenser.get("llm"), dict):
        out["condenser"] = {**condenser, "llm": _with(condenser["llm"], fields)}
    return out


def _with(llm: LlmFields, fields: LlmFields) -> LlmFields:
    out = {**llm, **fields}
    if out.get("base_url") is None:
        out.pop("base_url", None)
    return out


def _new_agent(sdk: Sdk, fields: LlmFields) -> JsonObject:
    from trio_acp.openhands.sdk import build_agent, build_llm

    agent = build_agent(sdk, build_llm(sdk, {k: v for k, v in fields.items() if v is not None}))
    return agent.model_dump(mode="json", context={"expose_secrets": True})


def write_private(path: Path, text: str) -> None:
    """Write `path` atomically, readable by its owner only (it holds an API key)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask or a leftover file said
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = -1
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
