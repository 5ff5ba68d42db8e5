// The TypeScript ACP SDK's client drives `sessiond acp`: initialize, new, prompt, cancel.
// Usage: node ts_client.mjs CWD COMMAND [ARG...]; prints one JSON object with what it saw.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Readable, Writable } from "node:stream";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(join(here, "..", "interop", "package.json"));
const acp = await import(pathToFileURL(require.resolve("@agentclientprotocol/sdk")).href);

const [cwd, command, ...args] = process.argv.slice(2);
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const updates = [];
let onUpdate = () => {};
const client = {
  async sessionUpdate(params) {
    updates.push(params.update);
    onUpdate(params.update);
  },
  async requestPermission(params) {
    return { outcome: { outcome: "selected", optionId: params.options[0].optionId } };
  },
};
const connection = new acp.ClientSideConnection(
  () => client,
  acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout)),
);
const texts = () =>
  updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content.text);

const seen = {};
try {
  const init = await connection.initialize({ protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  seen.protocolVersion = init.protocolVersion;
  seen.loadSession = init.agentCapabilities.loadSession;
  seen.agent = init.agentInfo.name;
  const { sessionId } = await connection.newSession({ cwd, mcpServers: [] });
  seen.sessionId = sessionId;
  const first = await connection.prompt({
    sessionId,
    prompt: [{ type: "text", text: "plan Greet\nsay hello from TypeScript" }],
  });
  seen.first = { stopReason: first.stopReason, texts: texts() };
  seen.plan = updates.filter((u) => u.sessionUpdate === "plan").map((u) => u.entries.map((e) => e.content));
  seen.commands = updates
    .filter((u) => u.sessionUpdate === "available_commands_update")
    .flatMap((u) => u.availableCommands.map((c) => c.name));
  const working = new Promise((resolve) => {
    onUpdate = (u) => {
      if (u.sessionUpdate === "agent_message_chunk" && u.content.text.includes("waiting")) resolve();
    };
  });
  const hanging = connection.prompt({ sessionId, prompt: [{ type: "text", text: "say waiting\nhang" }] });
  await working;
  await connection.cancel({ sessionId });
  seen.cancelled = (await hanging).stopReason;
} catch (error) {
  seen.error = String(error?.message ?? error);
} finally {
  child.stdin.end();
}
await new Promise((resolve) => child.on("exit", resolve));
process.stdout.write(JSON.stringify(seen) + "\n");
