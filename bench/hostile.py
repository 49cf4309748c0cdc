"""`python -m bench hostile`: a seeded corpus of hostile frames against one `trio-acp` process.

The randomized, heavier companion of tests/e2e/test_hostile_input.py. A generator (seeded:
`--seed`) builds `--cases` frames: real ACP methods with mutated params (wrong types, odd
ids of every JSON type, hostile cwds and session ids, path traversal, NUL, huge strings,
deep nesting, many content blocks), byte garbage (invalid UTF-8, truncated JSON, control
bytes) and notifications. They go out in bursts without reading; after each burst every
request with a valid id must have exactly one answer, and a health prompt in a session must
end its turn. Printed: counts, the error-code histogram, health failures, invalid stdout
lines, whether the agent stayed up, and anything written outside the persistence directory.
The verdicts are printed, not asserted.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from trio_acp.testing import ScriptedLLM, scenario_prompt, scripted_env
from trio_acp.testing.raw_agent import Hang, RawAgent, same_id

METHODS = [
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/resume",
    "session/list",
    "session/prompt",
    "session/set_mode",
    "session/set_config_option",
    "session/close",
    "session/fork",
    "session/delete",
    "_hostile/ext",
    "nonexistent",
    "",
    "$/cancel_request",
]
NOTIFICATIONS = ["session/cancel", "$/cancel_request", "_hostile/note", "initialized"]


class Generator:
    def __init__(self, rng: random.Random, ws: str, outside: str, live_sid: str) -> None:
        self.rng, self.ws, self.outside, self.live_sid = rng, ws, outside, live_sid

    def string(self) -> str:
        r = self.rng
        return r.choice(
            [
                "",
                "x",
                "../../x",
                "/etc/passwd",
                "\x00",
                "a\x00b",
                "😀" * r.randint(1, 50),
                "\ud7ff",
                "x" * r.randint(1000, 200_000),
                f"{self.ws}/..",
                self.outside,
                f"file://{self.outside}/secret.txt",
                "00000000-0000-0000-0000-000000000000",
                self.live_sid,
                self.live_sid.upper(),
                "{" + self.live_sid + "}",
                "urn:uuid:" + self.live_sid,
                "%2e%2e%2f",
                "\u202e",
                "\r\n",
            ]
        )

    def value(self, depth: int = 0) -> Any:
        r = self.rng
        kind = r.randrange(9 if depth < 4 else 6)
        if kind == 0:
            return None
        if kind == 1:
            return r.choice([True, False])
        if kind == 2:
            return r.choice([0, -1, 2**31, 2**63 - 1, 2**64, -(2**70), r.randint(-(10**6), 10**6)])
        if kind == 3:
            return r.choice([1.5, -0.0, 1e308, 1e-320])
        if kind in (4, 5):
            return self.string()
        if kind == 6:
            return [self.value(depth + 1) for _ in range(r.randint(0, 5))]
        if kind == 7:
            return {self.string()[:20]: self.value(depth + 1) for _ in range(r.randint(0, 5))}
        return self.nested(r.randint(10, 1000))

    def nested(self, depth: int) -> Any:
        value: Any = 1
        for _ in range(depth):
            value = [value]
        return value

    def block(self) -> Any:
        r = self.rng
        uri = r.choice(
            [
                f"file://{self.outside}/secret.txt",
                "file:///etc/shadow",
                f"file://{self.ws}/a",
                "http://x",
                self.string(),
            ]
        )
        return r.choice(
            [
                {"type": "text", "text": self.string()},
                {"type": "resource_link", "name": self.string(), "uri": uri},
                {"type": "resource", "resource": {"uri": uri, "text": self.string()}},
                {
                    "type": "resource",
                    "resource": {
                        "uri": uri,
                        "blob": "AAAA" * r.randint(1, 10_000),
                        "mimeType": r.choice(["image/png", "application/x", None]),
                    },
                },
                {"type": "image", "mimeType": "image/png", "data": r.choice(["", "AAAA", "!!!"])},
                {"type": r.choice(["video", "", None, 3])},
                self.value(),
            ]
        )

    def params(self, method: str) -> Any:
        r = self.rng
        if r.random() < 0.15:
            return self.value()
        p: dict[str, Any] = {}
        if method.startswith("session/") and method not in ("session/new", "session/list"):
            p["sessionId"] = r.choice([self.string(), self.live_sid, self.value()])
        if method in (
            "session/new",
            "session/load",
            "session/resume",
            "session/fork",
            "session/list",
        ):
            p["cwd"] = r.choice([self.ws, self.string(), self.value(), "relative", "/nonexistent"])
            p["mcpServers"] = r.choice(
                [[], self.value(), [{"name": "x", "command": "/bin/false", "args": [], "env": []}]]
            )
        if method == "session/prompt":
            p["prompt"] = [self.block() for _ in range(r.choice([0, 1, 3, 50, 2000]))]
        if method == "initialize":
            p["protocolVersion"] = r.choice([1, 0, 2**40, "1", None])
        for _ in range(r.randint(0, 2)):
            p[self.string()[:30]] = self.value()
        return p

    def frame(self) -> tuple[bytes, Any]:
        """One line, and the id an answer must carry (None: no answer required)."""
        r = self.rng
        roll = r.random()
        if roll < 0.1:
            garbage = r.choice(
                [
                    bytes(r.randrange(256) for _ in range(r.randint(1, 200))),
                    b'{"jsonrpc":"2.0","id":1,"method":"initialize"',
                    b"\xff" * 10,
                    b"[" * 5000,
                    b'{"jsonrpc":"2.0","id":"\xc3\x28","method":"x"}',
                ]
            )
            return garbage.replace(b"\n", b" "), None
        if roll < 0.2:
            method = r.choice(NOTIFICATIONS)
            return json.dumps(
                {"jsonrpc": "2.0", "method": method, "params": self.params(method)}
            ).encode(), None
        method = r.choice(METHODS)
        rid: Any = r.choice([f"h{r.getrandbits(48)}", r.getrandbits(40), None, 1.5, True, [], {}])
        frame: dict[str, Any] = {
            "jsonrpc": r.choice(["2.0"] * 9 + ["1.0"]),
            "id": rid,
            "method": method,
            "params": self.params(method),
        }
        try:
            line = json.dumps(frame, ensure_ascii=r.random() < 0.5).encode("utf-8", "surrogatepass")
        except (ValueError, RecursionError):
            return b"{}", None
        valid = isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
        return line, rid if valid else None


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in root.rglob("*")
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench hostile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cases", type=int, default=3000, help="frames to send (default 3,000)")
    parser.add_argument(
        "--burst", type=int, default=100, help="frames per unread burst (default 100)"
    )
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--blocks",
        type=int,
        default=10_000,
        help="then time one prompt of this many content blocks in a new session "
        "(default 10,000; 0: skip)",
    )
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="trio-acp-hostile-"))
    persist, ws, outside, tmp, home = (
        root / n for n in ("persist", "ws", "outside", "tmp", "home")
    )
    for d in (persist, ws, outside, tmp, home):
        d.mkdir()
    (outside / "secret.txt").write_text("sentinel-secret")
    before = tree(outside)
    started = time.perf_counter()
    codes: collections.Counter[Any] = collections.Counter()
    missing = duplicates = health_failures = sent = reopened = 0
    failure_examples: list[str] = []
    verdict = "survived"
    with ScriptedLLM() as llm:
        env = dict(os.environ)
        env.update(scripted_env(llm.base_url))
        env.update(
            OPENHANDS_PERSISTENCE_DIR=str(persist),
            TMPDIR=str(tmp),
            HOME=str(home),
            LLM_NUM_RETRIES="1",
            LLM_TIMEOUT="1800",
            TRIO_ACP_DEFAULT_MODE="always-ask",
        )  # nothing a fuzzed prompt asks for runs unasked
        agent = RawAgent.spawn(env, cwd=str(ws))
        try:
            agent.initialize()
            sid = agent.new_session(str(ws), timeout=300)
            gen = Generator(random.Random(args.seed), str(ws), str(outside), sid)
            while sent < args.cases:
                burst = [gen.frame() for _ in range(min(args.burst, args.cases - sent))]
                sent += len(burst)
                start = len(agent.frames)
                agent.write(b"".join(line + b"\n" for line, _ in burst), read=False, timeout=120)
                # Permission questions a fuzzed prompt raised: refuse them, or the turn waits.
                for rid in [rid for _, rid in burst if rid is not None]:
                    while True:
                        try:
                            agent.response(rid, timeout=120)
                            break
                        except Hang:
                            asks = [
                                f
                                for f in agent.frames
                                if f.get("method") == "session/request_permission"
                                and not f.get("_answered")
                            ]
                            if not asks:
                                raise
                            for ask in asks:
                                ask["_answered"] = True
                                agent.send(
                                    {
                                        "jsonrpc": "2.0",
                                        "id": ask["id"],
                                        "result": {"outcome": {"outcome": "cancelled"}},
                                    }
                                )
                answers = [f for f in agent.frames[start:] if "method" not in f]
                for _, rid in burst:
                    if rid is None:
                        continue
                    mine = [f for f in answers if same_id(f.get("id"), rid)]
                    missing += not mine
                    duplicates += len(mine) > 1
                codes.update(f.get("error", {}).get("code", "result") for f in answers)
                reply = agent.prompt(sid, scenario_prompt("echo", "health"), timeout=120)
                if reply.get("error", {}).get("code") == -32002:
                    # The corpus closed or deleted the live session (its id is in the corpus):
                    # a new one, and the prompt again.
                    reopened += 1
                    sid = gen.live_sid = agent.new_session(str(ws), timeout=300)
                    reply = agent.prompt(sid, scenario_prompt("echo", "health"), timeout=120)
                if reply.get("result", {}).get("stopReason") != "end_turn":
                    health_failures += 1
                    failure_examples.append(str(reply.get("error"))[:200])
                print(f"\r{sent:,}/{args.cases:,} frames", end="", flush=True)
            print()
            if args.blocks:
                blocks = [
                    {"type": "text", "text": scenario_prompt("slow", "many", chunks=3, delay_ms=1)}
                ]
                blocks += [{"type": "text", "text": f"b{i}"} for i in range(args.blocks - 1)]
                many = agent.new_session(str(ws), timeout=300)
                t0 = time.perf_counter()
                reply = agent.prompt(many, blocks, timeout=1800)
                print(
                    f"one prompt of {args.blocks:,} content blocks: {time.perf_counter() - t0:.1f} s, "
                    f"{reply.get('result') or reply.get('error')}"
                )
                # The prompt stays in the history: every later model call of the session
                # sends it again.
                t0 = time.perf_counter()
                reply = agent.prompt(
                    many, scenario_prompt("slow", "again", chunks=3, delay_ms=1), timeout=1800
                )
                print(
                    f"the next one-line prompt in that session: {time.perf_counter() - t0:.1f} s, "
                    f"{reply.get('result') or reply.get('error')}"
                )
        except Hang as exc:
            verdict = f"HANG: {exc}"
        finally:
            alive = agent.alive()
            status = agent.close(timeout=60) if alive else agent.process.returncode
    elapsed = time.perf_counter() - started
    print(
        f"seed {args.seed}: {sent:,} frames in {elapsed:.0f} s, {verdict}; agent alive until the end: {alive}, "
        f"exit status {status}"
    )
    print(
        f"requests unanswered {missing}, answered twice {duplicates}, failed health prompts {health_failures} "
        f"{failure_examples[:2]}, live session closed by the corpus and reopened {reopened}×, "
        f"invalid stdout lines {len(agent.bad_lines)}"
    )
    print("answers: " + ", ".join(f"{code}: {n}" for code, n in codes.most_common()))
    print(
        f"outside tree unchanged: {tree(outside) == before}; TMPDIR left: {sorted(p.name for p in tmp.iterdir())[:5]}; "
        f"HOME entries: {sorted(str(p.relative_to(home)) for p in home.rglob('*'))[:6]}"
    )


if __name__ == "__main__":
    main()
