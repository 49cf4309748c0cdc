// An editor-shaped client on the official TypeScript ACP SDK (@agentclientprotocol/sdk):
// it implements fs/* (its buffers may differ from the disk) and terminal/* (real
// processes, one process group per terminal) itself, and records every call.
//
// Usage: node editor_client.mjs CONFIG_JSON <agent command...>
//
// CONFIG_JSON: {"caps": "editor" | "none", "cwd": DIR, "buffers": {path: text},
//               "prompts": [{"name": ..., "text": ..., "cancelAfter": "terminal/create" | null}]}
// With caps "editor" the client advertises fs.readTextFile, fs.writeTextFile and terminal;
// with "none", no capabilities. Each prompt runs in turn in one session; with
// `cancelAfter`, session/cancel is sent as soon as the agent makes that request.
// Prints ONE JSON line: {"prompts": {name: {stopReason, cancelMs, updates, calls}}, "calls",
// "buffers", "permissions"}. Exit status 0 when the scenario ran, 1 on a crash.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const TIMEOUT_MS = 90_000;

function withTimeout(promise, what, ms = TIMEOUT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

class Terminals {
  constructor(calls) {
    this.calls = calls;
    this.next = 0;
    this.terms = new Map();
  }

  create(params) {
    const id = `term-${++this.next}`;
    const env = { ...process.env };
    for (const { name, value } of params.env ?? []) env[name] = value;
    const child = spawn(params.command, params.args ?? [], {
      cwd: params.cwd ?? process.cwd(),
      env,
      detached: true, // its own process group: kill reaches what it started
      stdio: ["ignore", "pipe", "pipe"],
    });
    const term = { child, output: "", limit: params.outputByteLimit ?? null, truncated: false, exit: null };
    const append = (chunk) => {
      term.output += chunk.toString("utf8");
      if (term.limit !== null && Buffer.byteLength(term.output) > term.limit) {
        term.output = term.output.slice(-term.limit);
        term.truncated = true;
      }
    };
    child.stdout.on("data", append);
    child.stderr.on("data", append);
    term.exited = new Promise((resolve) =>
      child.on("close", (code, signal) => {
        term.exit = { exitCode: code, signal: signal ?? null };
        resolve(term.exit);
      }),
    );
    child.on("error", (err) => {
      term.output += String(err);
      term.exit = { exitCode: 127, signal: null };
    });
    this.terms.set(id, term);
    return { terminalId: id };
  }

  get(id) {
    const term = this.terms.get(id);
    if (!term) throw new acp.RequestError(-32602, `unknown terminal ${id}`);
    return term;
  }

  kill(id) {
    const term = this.get(id);
    if (term.exit === null) {
      try {
        process.kill(-term.child.pid, "SIGKILL");
      } catch {}
    }
    return {};
  }

  release(id) {
    this.kill(id);
    this.terms.delete(id);
    return {};
  }
}

async function main() {
  const [configJson, ...command] = process.argv.slice(2);
  const config = JSON.parse(configJson);
  const editor = config.caps === "editor";
  const buffers = { ...(config.buffers ?? {}) };

  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

  // Every client-side call, in arrival order: [method, params summary, ms since start].
  const t0 = performance.now();
  const calls = [];
  const cancelledRequests = [];
  const updates = [];
  const permissions = [];
  let onCall = () => {};
  const record = (method, detail) => {
    calls.push([method, detail, Math.round(performance.now() - t0)]);
    onCall(method);
  };
  const terminals = new Terminals(calls);

  const app = acp
    .client({ name: "official-ts-editor" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push(params.update);
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      permissions.push(params.toolCall);
      const allow = params.options.find((o) => o.kind === "allow_once") ?? params.options[0];
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    })
    .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
      record("fs/read_text_file", { path: params.path });
      const text = params.path in buffers ? buffers[params.path] : readFileSync(params.path, "utf8");
      return { content: text };
    })
    .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
      record("fs/write_text_file", { path: params.path, content: params.content });
      buffers[params.path] = params.content; // the buffer, for the user to review and save
      return {};
    })
    .onRequest(acp.methods.client.terminal.create, ({ params }) => {
      const created = terminals.create(params);
      record("terminal/create", { terminalId: created.terminalId, command: params.command, args: params.args });
      return created;
    })
    .onRequest(acp.methods.client.terminal.waitForExit, async ({ params, signal }) => {
      record("terminal/wait_for_exit", { terminalId: params.terminalId });
      const term = terminals.get(params.terminalId);
      const aborted = new Promise((_, reject) => {
        signal.addEventListener("abort", () => {
          cancelledRequests.push("terminal/wait_for_exit");
          record("$/cancel_request", { method: "terminal/wait_for_exit" });
          reject(new acp.RequestError(-32800, "request cancelled"));
        });
      });
      return await Promise.race([term.exited, aborted]);
    })
    .onRequest(acp.methods.client.terminal.output, ({ params }) => {
      record("terminal/output", { terminalId: params.terminalId });
      const term = terminals.get(params.terminalId);
      return { output: term.output, truncated: term.truncated, exitStatus: term.exit };
    })
    .onRequest(acp.methods.client.terminal.kill, ({ params }) => {
      record("terminal/kill", { terminalId: params.terminalId });
      return terminals.kill(params.terminalId);
    })
    .onRequest(acp.methods.client.terminal.release, ({ params }) => {
      record("terminal/release", { terminalId: params.terminalId });
      return terminals.release(params.terminalId);
    });

  const summary = { prompts: {} };
  await app.connectWith(stream, async (ctx) => {
    const init = await withTimeout(
      ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: editor ? { fs: { readTextFile: true, writeTextFile: true }, terminal: true } : {},
        clientInfo: { name: "official-ts-editor", version: "0.0.1" },
      }),
      "initialize",
    );
    summary.agentCapabilities = init.agentCapabilities;
    const sid = (
      await withTimeout(ctx.request(acp.methods.agent.session.new, { cwd: config.cwd, mcpServers: [] }), "session/new")
    ).sessionId;
    for (const prompt of config.prompts) {
      const callsBefore = calls.length;
      const updatesBefore = updates.length;
      let cancelSent = null;
      let armed = Boolean(prompt.cancelAfter);
      if (armed) {
        onCall = (method) => {
          if (method === prompt.cancelAfter && armed) {
            armed = false;
            // A moment later: the command is running and the agent waits on it.
            setTimeout(() => {
              cancelSent = performance.now();
              record("session/cancel (sent)", {});
              ctx.notify(acp.methods.agent.session.cancel, { sessionId: sid });
            }, prompt.cancelDelayMs ?? 200);
          }
        };
      }
      const response = await withTimeout(
        ctx.request(acp.methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text: prompt.text }] }),
        `prompt ${prompt.name}`,
      );
      const returned = performance.now();
      onCall = () => {};
      summary.prompts[prompt.name] = {
        stopReason: response.stopReason,
        cancelMs: cancelSent === null ? null : Math.round(returned - cancelSent),
        calls: calls.slice(callsBefore),
        updates: updates.slice(updatesBefore),
      };
    }
  });

  child.stdin.end();
  summary.agentExit = await withTimeout(exited, "agent exit", 15_000).catch(() => {
    child.kill("SIGKILL");
    return { code: null, signal: "SIGKILL" };
  });
  summary.calls = calls;
  summary.cancelledRequests = cancelledRequests;
  summary.buffers = buffers;
  summary.permissions = permissions;
  summary.liveTerminals = [...terminals.terms.keys()];
  process.stdout.write(JSON.stringify(summary) + "\n");
}

main().catch((err) => {
  process.stderr.write(`editor_client.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});
