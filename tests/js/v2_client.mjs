// End to end with the official TypeScript ACP SDK's experimental ACP v2 client
// (@agentclientprotocol/sdk/experimental/v2).
//
// Usage: node v2_client.mjs <cwd> <prompt text> <agent command...>
//
// Spawns the agent, initializes with protocolVersion 2, opens a session in <cwd>, sends
// the prompt, allows any permission question, and reads the session's updates until the
// idle that ends the turn. Prints ONE JSON summary line on stdout: the negotiated version,
// the prompt's answer, the text the SDK collected, the states and update kinds it saw.
// Exit status 0 when the scenario ran, 1 on a crash (the SDK validates every frame it
// receives against the v2 types, so a malformed frame is a crash here).

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as v2 from "@agentclientprotocol/sdk/experimental/v2";

const TIMEOUT_MS = 120_000;

function withTimeout(promise, what, ms = TIMEOUT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function main() {
  const [cwd, text, ...command] = process.argv.slice(2);
  const child = spawn(command[0], command.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
  const stream = v2.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const questions = [];
  const app = v2.client({ name: "official-ts-v2-e2e" }).onRequest(
    v2.methods.client.session.requestPermission,
    ({ params }) => {
      questions.push(params.title);
      const allow = params.options.find((o) => o.kind === "allow_once") ?? params.options[0];
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    },
  );
  const summary = { questions };
  await app.connectWith(stream, async (ctx) => {
    const init = await withTimeout(
      ctx.request(v2.methods.agent.initialize, {
        protocolVersion: 2,
        info: { name: "official-ts-v2-e2e", version: "0.0.1" },
        capabilities: {},
      }),
      "initialize",
    );
    summary.protocolVersion = init.protocolVersion;
    summary.agent = init.info.name;
    const session = await withTimeout(ctx.buildSession(cwd).start(), "session/new");
    const answer = await withTimeout(session.prompt(text), "session/prompt");
    summary.messageId = answer.messageId;
    const kinds = [];
    const states = [];
    let collected = "";
    for (;;) {
      const message = await withTimeout(session.nextUpdate(), "the turn's updates");
      const update = message.update;
      kinds.push(update.sessionUpdate);
      if (update.sessionUpdate === "agent_message_chunk" && update.content.type === "text") {
        collected += update.content.text;
      }
      if (update.sessionUpdate === "state_update") {
        states.push(update.state);
        if (update.state === "idle" && update.stopReason) {
          summary.stopReason = update.stopReason;
          break;
        }
      }
    }
    summary.kinds = kinds;
    summary.states = states;
    summary.text = collected;
    session.dispose();
  });
  child.stdin.end();
  summary.exitCode = await withTimeout(exited, "the agent's exit", 30_000);
  process.stdout.write(JSON.stringify(summary) + "\n");
}

main().catch((error) => {
  process.stderr.write(`v2_client: ${error?.stack ?? error}\n`);
  process.exit(1);
});
