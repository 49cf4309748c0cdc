"""Reports: a table for the terminal, JSON for machines, Markdown for docs."""

from __future__ import annotations

import json
from typing import Any

import attrs

from .model import Level, Result, Status


@attrs.define
class Report:
    command: list[str]
    profile: str
    results: list[Result]
    agent: dict[str, Any] = attrs.Factory(dict)  # agentInfo, protocolVersion, capabilities
    schema: dict[str, Any] = attrs.Factory(dict)
    notes: list[str] = attrs.Factory(list)
    duration: float = 0.0

    def summary(self) -> dict[str, int]:
        out = {s.value: 0 for s in Status}
        for r in self.results:
            out[r.status.value] += 1
        out["failed_required"] = sum(1 for r in self.results if r.fails_run)
        return out

    @property
    def exit_code(self) -> int:
        return 1 if any(r.fails_run for r in self.results) else 0

    def as_dict(self) -> dict[str, Any]:
        from . import __version__

        return {
            "suite": {"name": "acp-conformance", "version": __version__},
            "command": self.command,
            "profile": self.profile,
            "agent": self.agent,
            "schema": self.schema,
            "summary": self.summary(),
            "exit_code": self.exit_code,
            "duration": round(self.duration, 2),
            "notes": self.notes,
            "checks": [r.as_dict() for r in self.results],
        }


STYLE = {
    Status.PASSED: "green",
    Status.FAILED: "bold red",
    Status.NOT_TESTED: "yellow",
    Status.SKIPPED: "dim",
}


def to_json(report: Report) -> str:
    return json.dumps(report.as_dict(), indent=2, ensure_ascii=False)


def print_table(report: Report, console: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_lines=False, title="ACP conformance", title_justify="left")
    for column in ("id", "level", "result", "check", "detail"):
        table.add_column(column, overflow="fold")
    for r in report.results:
        level = r.check.level.value
        if r.check.level is Level.CAPABILITY:
            level = f"capability ({r.check.capability})"
        table.add_row(
            r.check.id,
            escape(level),
            f"[{STYLE[r.status]}]{r.status.value}[/]",
            escape(r.check.title),
            escape(r.detail),
        )
    console.print(table)
    s = report.summary()
    verdict = "[bold red]FAIL[/]" if report.exit_code else "[bold green]PASS[/]"
    console.print(
        f"{verdict}  {s['passed']} passed, {s['failed']} failed ({s['failed_required']} mandatory"
        f"/capability), {s['not tested']} not tested, {s['skipped']} skipped  "
        f"[dim]{report.duration:.1f} s[/]"
    )
    for note in report.notes:
        console.print(f"[dim]note: {escape(note)}[/]")


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(report: Report) -> str:
    s = report.summary()
    lines = [
        "| id | level | result | check | detail |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in report.results:
        level = r.check.level.value
        if r.check.level is Level.CAPABILITY:
            level = f"capability ({r.check.capability})"
        result = f"**{r.status.value}**" if r.status is Status.FAILED else r.status.value
        lines.append(
            f"| {r.check.id} | {_md(level)} | {result} | {_md(r.check.title)} | {_md(r.detail)} |"
        )
    lines.append("")
    lines.append(
        f"{s['passed']} passed, {s['failed']} failed ({s['failed_required']} mandatory/capability), "
        f"{s['not tested']} not tested, {s['skipped']} skipped; exit code {report.exit_code}; "
        f"{report.duration:.0f} s."
    )
    return "\n".join(lines) + "\n"
