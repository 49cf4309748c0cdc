"""What checks run against: the agent processes, sessions, turns and the scripted model.

One *main* agent process serves most checks (an agent may take seconds to start its first
session, so the suite does not spawn one per check); checks that need a process of their
own (initialize variants, exit on EOF) spawn *fresh* ones.  Every process's frames are kept
for the checks that judge the whole run (schema, framing, capabilities).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from . import __version__
from .editor import EditorServices
from .harness import (
    AgentExited,
    AgentProcess,
    Frame,
    PendingRequest,
    PermissionPolicy,
    Reply,
    RequestTimeout,
    open_agent,
)
from .model import NotTested, Skipped
from .profiles import Prepared
from .scenarios import shell_prompt
from .schema_source import SchemaValidator

CLIENT_INFO = {"name": "acp-conformance", "title": "ACP conformance suite", "version": __version__}

#: What the suite's client advertises: nothing (every capability false).
NO_CAPABILITIES: dict[str, Any] = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
}

#: Updates that belong to a session rather than to a turn: allowed outside a turn.
SESSION_LEVEL_UPDATES = frozenset(
    {
        "available_commands_update",
        "session_info_update",
        "usage_update",
        "config_option_update",
        "current_mode_update",
    }
)

STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})


@attrs.define
class RunConfig:
    command: list[str]
    profile: str = "generic"
    scratch: Path | None = None
    schema_path: str | None = None
    extra_env: dict[str, str] = attrs.Factory(dict)
    only: list[str] | None = None
    #: Mode id that makes the agent ask permission before running a tool (else: guessed).
    permission_mode: str | None = None
    #: The first session/new may wait for the agent's own start-up (SDK imports, ...).
    session_timeout: float = 120.0
    #: How long a new agent process has to answer initialize (its interpreter's start-up:
    #: a Python agent on a loaded machine may need more than the default).
    init_timeout: float = 30.0
    prompt_timeout: float = 60.0
    allow_schema_download: bool = True
    #: The agent processes' working directory (default: the suite's); sessions use their own.
    agent_cwd: str | None = None
    #: Keep a temporary scratch directory after the run.
    keep_scratch: bool = False


@attrs.define
class Turn:
    """One ``session/prompt`` and everything the agent sent for it."""

    session_id: str
    request: Frame
    reply: Reply | None
    updates: list[Frame]  # session/update for this session, request → response
    requests: list[Frame]  # agent → client requests, request → response
    late: list[Frame]  # session/update for this session after the response (grace window)
    others: list[Frame]  # session/update for OTHER session ids during the turn

    @property
    def stop_reason(self) -> Any:
        if self.reply is None or not self.reply.ok or not isinstance(self.reply.result, dict):
            return None
        return self.reply.result.get("stopReason")

    def kinds(self) -> list[str]:
        return [f.update_kind or "?" for f in self.updates]

    def text(self) -> str:
        out = []
        for f in self.updates:
            if f.update_kind == "agent_message_chunk":
                content = f.params["update"].get("content")
                if isinstance(content, dict) and isinstance(content.get("text"), str):
                    out.append(content["text"])
        return "".join(out)

    def tool_calls(self) -> list[Frame]:
        return [f for f in self.updates if f.update_kind in ("tool_call", "tool_call_update")]

    def permission_requests(self) -> list[Frame]:
        return [f for f in self.requests if f.method == "session/request_permission"]


class Context:
    def __init__(
        self,
        config: RunConfig,
        *,
        llm: Any,
        prepared: Prepared,
        scratch: Path,
        nursery: trio.Nursery,
        validator: SchemaValidator | None,
        schema_problem: str | None,
        schema_version: str = "",
    ) -> None:
        self.config = config
        self.llm = llm
        self.prepared = prepared
        self.scratch = scratch
        self.workdir = scratch / "workspace"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.markers = scratch / "markers"
        self.markers.mkdir(parents=True, exist_ok=True)
        self._nursery = nursery
        self.validator = validator
        self.schema_problem = schema_problem
        self.schema_version = schema_version
        self.agents: list[AgentProcess] = []
        self.unjudged_agents: list[AgentProcess] = []
        self._main: AgentProcess | None = None
        self._main_failure: str | None = None
        self.main_init: Reply | None = None
        self._spawned = 0
        self.sessions: dict[str, dict[str, Any]] = {}  # session id → session/new result
        self.session_failure: str | None = None
        self._shared_session: str | None = None
        self.turns: list[Turn] = []
        #: How this agent is made to ask permission: None = unknown yet, "" = by default,
        #: "mode:<id>" / "config:<configId>=<value>", or "-" = no way found.
        self.permission_approach: str | None = None
        self.permission_note = ""
        self.notes: list[str] = []
        #: Results of expensive scenarios shared by several checks (e.g. one cancelled turn).
        self.memo: dict[str, Any] = {}
        self.current_check: str | None = None

    # --- processes --------------------------------------------------------------------

    @asynccontextmanager
    async def spawn(self, label: str, *, judged: bool = True) -> AsyncIterator[AgentProcess]:
        """A fresh agent process (not initialized), stopped when the block ends.

        ``judged``: whether the whole-run checks (v1 schema, framing, ...) judge its
        frames; an ACP v2 connection (`checks/v2.py`) is judged by its own checks."""
        self._spawned += 1
        name = f"{self._spawned:02d}-{label}"
        async with open_agent(
            name,
            self.config.command,
            env=self.prepared.env,
            cwd=self.config.agent_cwd or os.getcwd(),
            stderr_path=self.scratch / f"stderr-{name}.log",
        ) as agent:
            (self.agents if judged else self.unjudged_agents).append(agent)
            yield agent

    async def _host(
        self, label: str, judged: bool = True, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with self.spawn(label, judged=judged) as agent:
            task_status.started(agent)
            await agent.retire.wait()

    async def spawn_long(self, label: str, *, judged: bool = True) -> AgentProcess:
        """A fresh agent process that lives until the end of the run (not initialized).

        It runs in the run's nursery, not in the calling check's cancel scope.
        """
        return await self._nursery.start(self._host, label, judged)

    def close(self) -> None:
        """Stop every long-lived agent process (the end of the run)."""
        for agent in self.agents + self.unjudged_agents:
            agent.retire.set()
            if agent.editor is not None:
                agent.editor.close()

    def prestart_editor_agent(self, label: str, capabilities: dict[str, Any]) -> dict[str, Any]:
        """Start `editor_agent(label, ...)` in the background (an agent's start-up can take
        a minute on a loaded machine: two of them overlap); its memo entry."""
        key = f"editor-agent:{label}"
        entry: dict[str, Any] | None = self.memo.get(key)
        if entry is None or (entry["done"].is_set() and not entry.get("alive", lambda: False)()):
            entry = {"done": trio.Event()}
            self.memo[key] = entry
            self._nursery.start_soon(self._start_editor_agent, label, capabilities, entry)
        return entry

    async def editor_agent(
        self, label: str, capabilities: dict[str, Any]
    ) -> tuple[AgentProcess, EditorServices, str]:
        """A long-lived agent process initialized by the suite acting as an editor that
        advertises `capabilities` (`editor.py`), with one session; one per label."""
        entry = self.prestart_editor_agent(label, capabilities)
        await entry["done"].wait()
        if "error" in entry:
            raise NotTested(entry["error"])
        result: tuple[AgentProcess, EditorServices, str] = entry["result"]
        return result

    async def _start_editor_agent(
        self, label: str, capabilities: dict[str, Any], entry: dict[str, Any]
    ) -> None:
        try:
            agent = await self.spawn_long(label)
            services = EditorServices(self._nursery)
            agent.editor = services
            params = {
                "protocolVersion": 1,
                "clientCapabilities": capabilities,
                "clientInfo": CLIENT_INFO,
            }
            reply = await self.initialize(agent, params)
            if not reply.ok:
                entry["error"] = f"initialize with {capabilities}: {reply.describe()}"
                return
            session = await agent.request(
                "session/new", self.new_session_params(), timeout=self.config.session_timeout
            )
            sid = session.result.get("sessionId") if session.ok else None
            if not isinstance(sid, str):
                entry["error"] = f"session/new: {session.describe()}"
                return
            entry["result"] = (agent, services, sid)
            entry["alive"] = lambda: agent.alive
        except Exception as exc:
            entry["error"] = f"starting the {label} agent: {exc}"
        finally:
            entry["done"].set()

    def retire_main(self, why: str) -> None:
        """Stop the main process (e.g. it stopped answering); the next check gets a new one."""
        if self._main is not None and not self._main.retire.is_set():
            self._main.retire.set()
            self.notes.append(
                f"the main agent process was replaced after {self.current_check}: {why}"
            )
            self._shared_session = None

    async def initialize(
        self,
        agent: AgentProcess,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Reply:
        if params is None:
            params = {
                "protocolVersion": 1,
                "clientCapabilities": NO_CAPABILITIES,
                "clientInfo": CLIENT_INFO,
            }
        if timeout is None:
            timeout = self.config.init_timeout
        reply = await agent.request("initialize", params, timeout=timeout)
        agent.initialize_params = params
        if reply.ok and isinstance(reply.result, dict):
            agent.initialize_result = reply.result
            version = reply.result.get("protocolVersion")
            if type(version) is int and version > 1 and agent in self.agents:
                # It negotiated a later version (the probe for 65535; ACP v2): the v1
                # rules of the whole-run checks do not apply to that connection.
                self.agents.remove(agent)
                self.unjudged_agents.append(agent)
        return reply

    async def main(self) -> AgentProcess:
        """The shared, initialized agent process (restarted if it died)."""
        if self._main is not None and self._main.alive and not self._main.retire.is_set():
            return self._main
        if self._main_failure is not None:
            raise NotTested(f"the agent is not usable: {self._main_failure}")
        if self._main is not None and not self._main.retire.is_set():
            self.notes.append(
                f"the main agent process exited during {self.current_check}; restarted"
            )
        self._shared_session = None
        agent = await self.spawn_long("main")
        try:
            reply = await self.initialize(agent)
        except (AgentExited, RequestTimeout) as exc:
            self._main_failure = f"initialize: {exc}; stderr: {agent.stderr_tail(300)!r}"
            raise NotTested(f"the agent is not usable: {self._main_failure}") from None
        if not reply.ok or not isinstance(reply.result, dict):
            self._main_failure = f"initialize answered {reply.describe()}"
            raise NotTested(f"the agent is not usable: {self._main_failure}")
        if self.main_init is None:
            self.main_init = reply
        self._main = agent
        return agent

    @property
    def init_result(self) -> dict[str, Any]:
        if self.main_init is None:
            return {}
        return self.main_init.result

    def agent_capabilities(self) -> dict[str, Any]:
        caps = self.init_result.get("agentCapabilities")
        return caps if isinstance(caps, dict) else {}

    def capability(self, *path: str) -> Any:
        node: Any = self.agent_capabilities()
        for key in path:
            if not isinstance(node, dict):
                return None
            node = node.get(key)
        return node

    async def require(self, *path: str, truthy: bool = True) -> Any:
        """Skip the calling check unless the agent advertises ``agentCapabilities.<path>``."""
        await self.main()
        value = self.capability(*path)
        advertised = bool(value) if truthy else value is not None
        if not advertised:
            raise Skipped(f"the agent does not advertise agentCapabilities.{'.'.join(path)}")
        return value

    # --- sessions ---------------------------------------------------------------------

    def new_session_params(self, **extra: Any) -> dict[str, Any]:
        return {"cwd": str(self.workdir), "mcpServers": [], **extra}

    async def new_session(
        self,
        agent: AgentProcess | None = None,
        *,
        id: Any = None,
        params: dict[str, Any] | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """A new session on the main agent (or ``agent``); NotTested if that fails."""
        if self.session_failure is not None and agent is None:
            raise NotTested(f"session/new does not work: {self.session_failure}")
        agent = agent or await self.main()
        try:
            reply = await agent.request(
                "session/new",
                params or self.new_session_params(),
                id=id,
                timeout=self.config.session_timeout,
            )
        except (AgentExited, RequestTimeout) as exc:
            self.session_failure = str(exc)
            raise NotTested(f"session/new failed: {exc}") from None
        result = reply.result if reply.ok else None
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(sid, str) or not sid:
            self.session_failure = reply.describe()
            raise NotTested(f"session/new failed: {reply.describe()}")
        self.sessions[sid] = result
        return sid, result

    async def shared_session(self) -> str:
        """An idle session on the main agent that checks may prompt (not close, not break)."""
        if self._shared_session is None or not (self._main and self._main.alive):
            self._shared_session, _ = await self.new_session()
        return self._shared_session

    def first_session_result(self) -> dict[str, Any] | None:
        return next(iter(self.sessions.values()), None)

    # --- turns ------------------------------------------------------------------------

    @staticmethod
    def text_blocks(text: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": text}]

    async def start_turn(
        self,
        agent: AgentProcess,
        session_id: str,
        prompt: str | list[dict[str, Any]],
        *,
        extra: dict[str, Any] | None = None,
        id: Any = None,
    ) -> tuple[int, PendingRequest]:
        blocks = self.text_blocks(prompt) if isinstance(prompt, str) else prompt
        mark = agent.mark()
        handle = await agent.start_request(
            "session/prompt", {"sessionId": session_id, "prompt": blocks, **(extra or {})}, id=id
        )
        return mark, handle

    async def finish_turn(
        self,
        agent: AgentProcess,
        session_id: str,
        mark: int,
        handle: PendingRequest,
        *,
        timeout: float | None = None,
        grace: float = 0.3,
        must_answer: bool = True,
    ) -> Turn:
        """Wait for the response, then ``grace`` seconds more to catch late updates."""
        try:
            reply: Reply | None = await handle.wait(timeout or self.config.prompt_timeout)
        except (RequestTimeout, AgentExited):
            if must_answer:
                raise
            reply = None
        if grace > 0 and agent.alive:
            await trio.sleep(grace)
        end = reply.frame.seq if reply is not None else 1 << 62
        frames = agent.since(mark)
        turn = Turn(
            session_id=session_id,
            request=handle.frame,
            reply=reply,
            updates=[
                f
                for f in frames
                if f.seq < end and f.method == "session/update" and f.session_id == session_id
            ],
            requests=[f for f in frames if f.seq < end and f.is_request],
            late=[
                f
                for f in frames
                if f.seq > end and f.method == "session/update" and f.session_id == session_id
            ],
            others=[
                f
                for f in frames
                if f.seq < end and f.method == "session/update" and f.session_id != session_id
            ],
        )
        self.turns.append(turn)
        return turn

    async def turn(
        self,
        session_id: str,
        prompt: str | list[dict[str, Any]],
        *,
        agent: AgentProcess | None = None,
        extra: dict[str, Any] | None = None,
        timeout: float | None = None,
        grace: float = 0.3,
        id: Any = None,
    ) -> Turn:
        """Prompt and wait for the turn to end; raises RequestTimeout / AgentExited."""
        agent = agent or await self.main()
        mark, handle = await self.start_turn(agent, session_id, prompt, extra=extra, id=id)
        return await self.finish_turn(agent, session_id, mark, handle, timeout=timeout, grace=grace)

    async def basic_traffic(self) -> None:
        """Make sure the run has at least one completed prompt turn (for whole-run checks)."""
        if any(t.reply is not None for t in self.turns):
            return
        from .scenarios import echo_prompt

        sid = await self.shared_session()
        await self.turn(sid, echo_prompt("conformance traffic"))

    # --- permission on demand -----------------------------------------------------------

    def marker(self) -> Path:
        return self.markers / f"ran-{uuid.uuid4().hex[:12]}"

    def _mode_candidates(self, result: dict[str, Any]) -> list[str]:
        out: list[str] = []
        hints = ([self.config.permission_mode] if self.config.permission_mode else []) + list(
            self.prepared.permission_modes
        )
        modes = result.get("modes") if isinstance(result.get("modes"), dict) else {}
        available = [m for m in modes.get("availableModes") or [] if isinstance(m, dict)]
        ids = [m.get("id") for m in available]
        for hint in hints:
            if hint in ids:
                out.append(f"mode:{hint}")
        for m in available:
            words = f"{m.get('id')} {m.get('name')}"
            if re.search(r"ask|confirm|manual|permission|review", words, re.I) and not re.search(
                r"approve|auto|bypass|yolo|never|full", str(m.get("id")), re.I
            ):
                out.append(f"mode:{m.get('id')}")
        for option in result.get("configOptions") or []:
            if not isinstance(option, dict) or option.get("category") != "mode":
                continue
            for value in _select_values(option):
                if (value in hints) or (
                    re.search(r"ask|confirm|manual|permission|review", value, re.I)
                    and not re.search(r"approve|auto|bypass|yolo|never|full", value, re.I)
                ):
                    out.append(f"config:{option.get('id')}={value}")
        seen: set[str] = set()
        return [c for c in out if not (c in seen or seen.add(c))]

    async def _apply_approach(self, agent: AgentProcess, sid: str, approach: str) -> None:
        if approach.startswith("mode:"):
            reply = await agent.request(
                "session/set_mode", {"sessionId": sid, "modeId": approach[5:]}
            )
        elif approach.startswith("config:"):
            config_id, _, value = approach[7:].partition("=")
            reply = await agent.request(
                "session/set_config_option",
                {"sessionId": sid, "configId": config_id, "value": value},
            )
        else:
            return
        if not reply.ok:
            raise NotTested(f"could not switch to {approach}: {reply.describe()}")

    async def permission_turn(
        self,
        policy: PermissionPolicy,
        *,
        timeout: float | None = None,
        grace: float = 0.5,
        before: Callable[[AgentProcess, str], Any] | None = None,
    ) -> tuple[Turn, Path, str]:
        """A turn in which the agent asks permission for a shell command.

        The command creates a marker file (its existence says whether the tool ran).  The
        first call finds out how to make the agent ask (by default, or in a session mode /
        config option that asks) and remembers it.  Returns (turn, marker, session id);
        NotTested when the agent cannot be made to ask.
        """
        agent = await self.main()
        if self.permission_approach == "-":
            raise NotTested(f"the agent never asked permission: {self.permission_note}")
        approaches = [self.permission_approach] if self.permission_approach is not None else None
        tried: list[str] = []
        while approaches is None or approaches:
            sid, result = await self.new_session()
            if approaches is None:
                approaches = [""] + self._mode_candidates(result)
            approach = approaches.pop(0)
            tried.append(approach or "default")
            await self._apply_approach(agent, sid, approach)
            agent.permission_policies[sid] = policy
            marker = self.marker()
            if before is not None:
                await before(agent, sid)
            turn = await self.turn(
                sid, shell_prompt(f"touch {marker}"), timeout=timeout, grace=grace
            )
            if turn.permission_requests():
                self.permission_approach = approach
                return turn, marker, sid
            if self.permission_approach is not None:  # it asked before, but not now
                raise NotTested(
                    f"the agent did not ask permission this time ({approach or 'default'})"
                )
            ran = "the command ran" if marker.exists() else "no tool ran"
            self.permission_note = f"tried {', '.join(tried)}; {ran}, no session/request_permission"
        self.permission_approach = "-"
        raise NotTested(f"the agent never asked permission: {self.permission_note}")

    # --- whole run ---------------------------------------------------------------------

    def all_inbound(self) -> list[tuple[AgentProcess, Frame]]:
        return [(a, f) for a in self.agents for f in a.frames if f.direction == "in"]


def _select_values(option: dict[str, Any]) -> list[str]:
    values: list[str] = []
    for entry in option.get("options") or []:
        if isinstance(entry, dict) and "value" in entry:
            values.append(str(entry["value"]))
        elif isinstance(entry, dict) and "options" in entry:  # a group
            values += [
                str(o.get("value")) for o in entry.get("options") or [] if isinstance(o, dict)
            ]
    return values


def select_values(option: dict[str, Any]) -> list[str]:
    return _select_values(option)
