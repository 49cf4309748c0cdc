"""Running the suite: ``python -m trio_acp_conformance [options] -- AGENT COMMAND...``.

Exit status: 0 when no mandatory check (nor capability check, where the capability is
advertised) failed; 1 otherwise; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import trio

from . import checks  # noqa: F401 - registers the checks
from .context import Context, RunConfig
from .harness import AgentExited, RequestTimeout
from .model import REGISTRY, Check, Level, Outcome, Result, Status
from .profiles import PROFILES
from .report import Report, print_table, to_json, to_markdown
from .scenarios import start_llm
from .schema_source import SchemaUnavailable, SchemaValidator, locate_schema

log = logging.getLogger("conformance")


def select_checks(only: list[str] | None) -> list[Check]:
    if not only:
        return list(REGISTRY.values())
    wanted = []
    for item in only:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            matches = [c for c in REGISTRY.values() if c.id == part or c.id.startswith(part)]
            if not matches:
                raise SystemExit(f"no check matches {part!r} (see --list)")
            wanted += matches
    ids = {c.id for c in wanted}
    return [c for c in REGISTRY.values() if c.id in ids]


async def run_check(ctx: Context, check: Check, *, verbose: bool = False) -> Result:
    ctx.current_check = check.id
    start = time.monotonic()
    status, detail = Status.PASSED, ""
    with trio.move_on_after(check.timeout) as scope:
        try:
            detail = await check.fn(ctx) or ""
        except Outcome as outcome:
            status, detail = outcome.status, outcome.detail
        except AgentExited as exc:
            status, detail = Status.FAILED, f"the agent exited: {exc}"
        except RequestTimeout as exc:
            status, detail = Status.FAILED, str(exc)
            # It may be wedged: later checks get a fresh process.
            ctx.retire_main(str(exc))
        except Exception as exc:  # a bug in the check, or an agent reply it did not foresee
            status, detail = (
                Status.NOT_TESTED,
                f"the check itself failed: {type(exc).__name__}: {exc}",
            )
            if verbose:
                traceback.print_exc()
    if scope.cancelled_caught:
        status, detail = Status.FAILED, f"the check did not finish within {check.timeout:g} s"
        ctx.retire_main(detail)
    return Result(check, status, " ".join(str(detail).split())[:400], time.monotonic() - start)


def _schema_version(path: Path) -> str:
    pkg = path.parent.parent.parent / "package.json"
    try:
        data = json.loads(pkg.read_text(encoding="utf-8"))
        return f"{data['name']} {data['version']}"
    except (OSError, ValueError, KeyError):
        return str(path)


async def run_suite(config: RunConfig, *, progress: Any = None, verbose: bool = False) -> Report:
    selected = select_checks(config.only)
    temporary = config.scratch is None and not config.keep_scratch
    scratch = config.scratch or Path(tempfile.mkdtemp(prefix="acp-conformance-"))
    scratch.mkdir(parents=True, exist_ok=True)
    validator, problem, version = None, None, ""
    try:
        path = locate_schema(config.schema_path, allow_download=config.allow_schema_download)
        validator = SchemaValidator(path)
        version = _schema_version(path)
    except SchemaUnavailable as exc:
        problem = str(exc)
    llm = start_llm()
    prepared = PROFILES[config.profile](llm.base_url, scratch, config.extra_env)
    results: list[Result] = []
    started = time.monotonic()
    try:
        async with trio.open_nursery() as nursery:
            ctx = Context(
                config,
                llm=llm,
                prepared=prepared,
                scratch=scratch,
                nursery=nursery,
                validator=validator,
                schema_problem=problem,
                schema_version=version,
            )
            for check in selected:
                result = await run_check(ctx, check, verbose=verbose)
                results.append(result)
                if progress is not None:
                    progress(result)
            agent = {}
            if ctx.main_init is not None:
                r = ctx.init_result
                agent = {
                    k: r.get(k)
                    for k in ("protocolVersion", "agentInfo", "agentCapabilities", "authMethods")
                }
                first = ctx.first_session_result() or {}
                agent["session"] = {k: first[k] for k in ("modes", "configOptions") if k in first}
            notes = list(ctx.notes)
            if ctx.permission_approach not in (None, "-"):
                notes.append(f"permission requests made by: {ctx.permission_approach or 'default'}")
            if not temporary:
                notes.append(f"scratch directory (agent stderr logs): {scratch}")
            ctx.close()
    finally:
        prepared.cleanup()
        await trio.to_thread.run_sync(llm.close)
        if temporary:
            shutil.rmtree(scratch, ignore_errors=True)
    return Report(
        command=list(config.command),
        profile=config.profile,
        results=results,
        agent=agent,
        schema={
            "path": str(validator.path) if validator else None,
            "source": version,
            "problem": problem,
        },
        notes=notes,
        duration=time.monotonic() - started,
    )


def build_parser(prog: str = "python -m trio_acp_conformance") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run the ACP v1 conformance suite against an agent command (launched over stdio).",
        epilog=f"Example: {prog} --json -- trio-acp",
    )
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="generic",
        help="how to hand the scripted model to the agent (default: generic)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    parser.add_argument(
        "--markdown", metavar="FILE", help="also write the result table as Markdown"
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="ID[,ID]",
        help="run only these checks (an id or an id prefix, e.g. ACP-CANCEL)",
    )
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument(
        "--schema", metavar="PATH", help="the official schema.json to validate against"
    )
    parser.add_argument(
        "--no-download", action="store_true", help="never fetch the schema from the npm registry"
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the agent",
    )
    parser.add_argument(
        "--permission-mode",
        metavar="MODE_ID",
        help="session mode that makes the agent ask permission (default: guessed)",
    )
    parser.add_argument("--scratch", metavar="DIR", help="working directory for the run (kept)")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the temporary working directory (agent stderr logs, sessions)",
    )
    parser.add_argument(
        "--session-timeout",
        type=float,
        default=120.0,
        help="seconds to wait for session/new (default: 120)",
    )
    parser.add_argument(
        "--init-timeout",
        type=float,
        default=30.0,
        help="seconds a new agent process has to answer initialize (default: 30)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show check tracebacks")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the agent command, after --")
    return parser


def list_checks(out: Any) -> None:
    for c in REGISTRY.values():
        level = c.level.value + (f" ({c.capability})" if c.level is Level.CAPABILITY else "")
        print(f"{c.id:20} {level:45} {c.title}", file=out)


def main(argv: list[str] | None = None, prog: str = "python -m trio_acp_conformance") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.list:
        list_checks(sys.stdout)
        return 0
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        parser.print_usage(sys.stderr)
        print("error: give the agent command after --", file=sys.stderr)
        return 2
    extra_env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--env {item!r}: expected KEY=VALUE")
        extra_env[key] = value
    if shutil.which(command[0]) is None and not Path(command[0]).exists():
        print(f"error: {command[0]!r} not found", file=sys.stderr)
        return 2
    config = RunConfig(
        command=command,
        profile=args.profile,
        scratch=Path(args.scratch) if args.scratch else None,
        schema_path=args.schema,
        extra_env=extra_env,
        only=args.only,
        permission_mode=args.permission_mode,
        session_timeout=args.session_timeout,
        init_timeout=args.init_timeout,
        allow_schema_download=not args.no_download,
        keep_scratch=args.keep,
    )
    from rich.console import Console
    from rich.markup import escape

    err = Console(stderr=True)

    def progress(r: Result) -> None:
        err.print(
            f"[dim]{r.check.id:20}[/] {r.status.value:10} [dim]{r.duration:5.1f}s {escape(r.detail[:90])}[/]",
            highlight=False,
            markup=True,
            soft_wrap=True,
        )

    report = trio.run(lambda: run_suite(config, progress=progress, verbose=args.verbose))
    if args.json:
        print(to_json(report))
    else:
        out = Console()
        if not out.is_terminal:
            out = Console(width=180)
        print_table(report, out)
    if args.markdown:
        Path(args.markdown).write_text(to_markdown(report), encoding="utf-8")
    return report.exit_code
