// End to end with the official TypeScript ACP SDK (@agentclientprotocol/sdk, v1 entrypoint).
//
// Usage: node echo_client.mjs [--frames FILE] <agent command...>
//
// Spawns the agent, runs the echo scenario (initialize, session/new, a prompt with
// updates, cancel mid `slow`, the `ask` permission flow, the `_echo/ping` extension
// method, an unknown method) and prints ONE JSON summary line on stdout. With --frames,
// every JSON-RPC frame in both directions is appended to FILE as JSON lines
// `{"dir": "to_agent" | "from_agent", "msg": {...}}`, for schema checks by the caller.
// Exit status 0 when the scenario ran (the summary says what happened), 1 on a crash.

import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const TIMEOUT_MS = 30_000;

function parseArgs(argv) {
  let frames = null;
  const rest = [...argv];
  if (rest[0] === "--frames") {
    frames = rest[1];
    rest.splice(0, 2);
  }
  if (rest.length === 0) {
    throw new Error("usage: node echo_client.mjs [--frames FILE] <agent command...>");
  }
  return { frames, command: rest };
}

function withTimeout(promise, what, ms = TIMEOUT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Wraps an ACP message stream so that every frame is recorded on its way through.
function recording(stream, frames) {
  const tap = (dir) =>
    new TransformStream({
      transform(msg, controller) {
        frames.push({ dir, msg: structuredClone(msg) });
        controller.enqueue(msg);
      },
    });
  const outgoing = tap("to_agent");
  outgoing.readable.pipeTo(stream.writable).catch(() => {});
  return {
    writable: outgoing.writable,
    readable: stream.readable.pipeThrough(tap("from_agent")),
  };
}

async function main() {
  const { frames: framesPath, command } = parseArgs(process.argv.slice(2));
  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));

  const frames = [];
  const wire = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const stream = recording(wire, frames);

  // Every session/update, in arrival order, as [sessionId, update].
  const updates = [];
  let onUpdate = () => {};
  const permissionRequests = [];
  const texts = (sid) =>
    updates
      .filter(([s, u]) => s === sid && u.sessionUpdate === "agent_message_chunk" && u.content.type === "text")
      .map(([, u]) => u.content.text);

  const app = acp
    .client({ name: "official-ts-e2e" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      // Synchronous on purpose: applied in arrival order, before the prompt's response.
      updates.push([params.sessionId, params.update]);
      onUpdate();
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      permissionRequests.push({
        sessionId: params.sessionId,
        toolCallId: params.toolCall.toolCallId,
        options: params.options.map((o) => o.optionId),
      });
      return { outcome: { outcome: "selected", optionId: "yes" } };
    });

  const summary = {};
  await app.connectWith(stream, async (ctx) => {
    const init = await withTimeout(
      ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {},
        clientInfo: { name: "official-ts-e2e", version: "0.0.1" },
      }),
      "initialize",
    );
    summary.protocolVersion = init.protocolVersion;
    summary.agentInfo = init.agentInfo ?? null;

    const cwd = process.cwd();
    const sid = (await withTimeout(ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] }), "session/new"))
      .sessionId;
    summary.sessionId = sid;

    // A prompt with updates: count what arrived before the response.
    const flood = await withTimeout(
      ctx.request(acp.methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text: "flood 200" }] }),
      "flood prompt",
    );
    const floodTexts = texts(sid).map((t) => t.trim());
    summary.flood = {
      stopReason: flood.stopReason,
      updatesAtReturn: floodTexts.length,
      inOrder: floodTexts.every((t, i) => t === `w${i}`),
    };
    const hello = await withTimeout(
      ctx.request(acp.methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text: "hello world" }] }),
      "hello prompt",
    );
    summary.hello = { stopReason: hello.stopReason, last: texts(sid).at(-1) };

    // Cancel mid `slow` in a second session; nothing for it may follow the response.
    const sid2 = (await withTimeout(ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] }), "session/new 2"))
      .sessionId;
    const firstChunk = new Promise((resolve) => {
      onUpdate = () => {
        if (texts(sid2).length > 0) resolve();
      };
    });
    const slow = ctx.request(acp.methods.agent.session.prompt, {
      sessionId: sid2,
      prompt: [{ type: "text", text: "slow 1000" }],
    });
    await withTimeout(firstChunk, "first slow chunk");
    onUpdate = () => {};
    await ctx.notify(acp.methods.agent.session.cancel, { sessionId: sid2 });
    const cancelled = await withTimeout(slow, "cancelled prompt");
    const atReturn = texts(sid2).length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    const later = texts(sid2).length;
    const again = await withTimeout(
      ctx.request(acp.methods.agent.session.prompt, { sessionId: sid2, prompt: [{ type: "text", text: "hello again" }] }),
      "prompt after cancel",
    );
    summary.cancel = {
      stopReason: cancelled.stopReason,
      updatesAtReturn: atReturn,
      updatesLater: later,
      againStopReason: again.stopReason,
      againLast: texts(sid2).at(-1),
    };

    // The permission round trip.
    const ask = await withTimeout(
      ctx.request(acp.methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text: "ask" }] }),
      "ask prompt",
    );
    summary.ask = {
      stopReason: ask.stopReason,
      permissionRequests,
      toolCalls: updates.filter(([s, u]) => s === sid && u.sessionUpdate === "tool_call").map(([, u]) => u.toolCallId),
      last: texts(sid).at(-1),
    };

    // An extension method, then unknown methods.
    summary.ping = await withTimeout(ctx.request("_echo/ping", { x: 1, s: "é" }), "_echo/ping");
    for (const [key, method] of [
      ["unknown", "session/unknown"],
      ["unknownExt", "_nope/nothing"],
    ]) {
      try {
        await withTimeout(ctx.request(method, {}), method);
        summary[key] = "answered";
      } catch (err) {
        summary[key] = err instanceof acp.RequestError ? err.code : `error: ${err}`;
      }
    }

    summary.sessionIdsSeen = [...new Set(updates.map(([s]) => s))].sort();
  });

  // connectWith closed the connection: the agent sees EOF and should exit on its own.
  child.stdin.end();
  const exit = await withTimeout(exited, "agent exit", 10_000).catch(() => {
    child.kill("SIGKILL");
    return { code: null, signal: "SIGKILL (did not exit after stdin EOF)" };
  });
  summary.agentExit = exit;
  summary.frames = frames.length;
  if (framesPath) {
    writeFileSync(framesPath, frames.map((f) => JSON.stringify(f)).join("\n") + "\n");
  }
  process.stdout.write(JSON.stringify(summary) + "\n");
}

main().catch((err) => {
  process.stderr.write(`echo_client.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});
