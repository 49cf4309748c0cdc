"""The conformance suite against other ACP agents, each on the suite's scripted model.

    python -m bench.conformance_peers --install /tmp/peers          # once: npm / uv, outside the repo
    python -m bench.conformance_peers --peers /tmp/peers [--only qwen-code,opencode]
        [--check ACP-PERM ...] [--out DIR] [--before DIR]

Each peer is installed at a pinned version into a folder of its own under `--install`
(never into this repository's lock), then run by `python -m trio_acp_conformance` with
the profile that points it at the scripted model (`conformance/profiles.py`).  The JSON
and Markdown reports go to `--out` (default: a new temporary folder); the summary table
(results per level, and every check not passed) is printed.  `--before DIR` compares with
the reports of an earlier run (e.g. the suite before a change): the checks whose status
changed, per peer.  The results and how they were read: `conformance/PEERS.md`.

The peers take minutes each (a fresh agent process per initialize check, the slow
scenario's ten seconds, the editor checks' own processes); the run is sequential.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import attrs


@attrs.frozen
class Peer:
    name: str
    #: How it is installed: ("npm", "package@version") or ("uv", "package==version").
    installer: str
    package: str
    #: The agent's command, relative to its install folder.
    command: tuple[str, ...]
    profile: str
    #: The Python for a `uv` install (None: this one; a peer may need a newer one).
    python: str | None = None


PEERS = (
    Peer(
        "qwen-code",
        "npm",
        "@qwen-code/qwen-code@0.24.4",
        ("node_modules/.bin/qwen", "--acp"),
        "qwen-code",
    ),
    Peer(
        "opencode", "npm", "opencode-ai@1.18.33", ("node_modules/.bin/opencode", "acp"), "opencode"
    ),
    Peer(
        "fast-agent",
        "uv",
        "fast-agent-mcp==0.10.48",
        ("bin/fast-agent-acp", "--model", "generic.scripted", "-x"),
        "fast-agent",
    ),
    # 3.0.3 pins a certifi release this machine's PyPI mirror lacks: 3.0.2 instead.
    Peer("mistral-vibe", "uv", "mistral-vibe==3.0.2", ("bin/vibe-acp",), "mistral-vibe"),
)


def install(peer: Peer, root: Path) -> None:
    folder = root / peer.name
    folder.mkdir(parents=True, exist_ok=True)
    if peer.installer == "npm":
        cmd = ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), peer.package]
        subprocess.run(cmd, check=True, timeout=900)
    else:
        uv = shutil.which("uv") or "uv"
        python = peer.python or sys.executable
        subprocess.run([uv, "venv", "-q", "-p", python, str(folder)], check=True, timeout=300)
        subprocess.run(
            [uv, "pip", "install", "-p", str(folder / "bin" / "python"), peer.package],
            check=True,
            timeout=1800,
        )


def run(peer: Peer, root: Path, out: Path, checks: list[str]) -> dict[str, Any]:
    command = [str(root / peer.name / peer.command[0]), *peer.command[1:]]
    report, md = out / f"{peer.name}.json", out / f"{peer.name}.md"
    scratch = out / f"{peer.name}.scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    started = time.monotonic()
    with report.open("w") as stdout, (out / f"{peer.name}.err").open("w") as stderr:
        subprocess.run(
            [sys.executable, "-m", "trio_acp_conformance", "-v", "--json"]
            # A Python peer's start-up on a loaded machine can take over the default 30 s.
            + [
                "--init-timeout",
                "120",
                "--profile",
                peer.profile,
                "--scratch",
                str(scratch),
                "--markdown",
                str(md),
            ]
            + [arg for check in checks for arg in ("--only", check)]
            + ["--", *command],
            stdout=stdout,
            stderr=stderr,
            timeout=3600,
            check=False,
        )
    data: dict[str, Any] = json.loads(report.read_text() or "{}")
    data["_seconds"] = round(time.monotonic() - started)
    return data


def statuses(report: dict[str, Any]) -> dict[str, str]:
    return {r["id"]: r["status"] for r in report.get("checks", [])}


def summary(name: str, report: dict[str, Any], before: dict[str, Any] | None) -> list[str]:
    info = (report.get("agent") or {}).get("agentInfo") or {}
    counts = Counter(r["status"] for r in report.get("checks", []))
    lines = [
        f"## {name} ({info.get('name')} {info.get('version')}): "
        + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        + f"; {report.get('_seconds', '?')} s"
    ]
    for r in report.get("checks", []):
        if r["status"] != "passed":
            lines.append(f"  {r['id']:<20} {r['level']:<10} {r['status']:<11} {r['detail'][:110]}")
    if before is not None:
        old, new = statuses(before), statuses(report)
        changed = [(i, old.get(i, "-"), s) for i, s in new.items() if old.get(i) != s]
        lines.append(f"  changed since --before: {len(changed)}")
        lines += [f"    {i:<20} {a} -> {b}" for i, a, b in changed]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--install", type=Path, help="install the peers into this folder")
    parser.add_argument("--peers", type=Path, help="the folder the peers are installed in")
    parser.add_argument("--only", help="comma-separated peer names")
    parser.add_argument("--out", type=Path, help="where the reports go")
    parser.add_argument("--before", type=Path, help="reports of an earlier run to compare")
    parser.add_argument(
        "--check",
        action="append",
        default=[],
        help="run only these checks (id or prefix, repeatable; default: all)",
    )
    args = parser.parse_args(argv)
    chosen = [p for p in PEERS if not args.only or p.name in args.only.split(",")]
    if args.install:
        for peer in chosen:
            install(peer, args.install)
        return 0
    if not args.peers:
        parser.error("--peers DIR (or --install DIR first)")
    out = args.out or Path(tempfile.mkdtemp(prefix="conformance-peers-"))
    out.mkdir(parents=True, exist_ok=True)
    for peer in chosen:
        report = run(peer, args.peers, out, args.check)
        earlier = args.before / f"{peer.name}.json" if args.before else None
        before = json.loads(earlier.read_text()) if earlier and earlier.exists() else None
        print("\n".join(summary(peer.name, report, before)), flush=True)
    print(f"reports: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
