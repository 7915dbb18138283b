// mcp_sdk_client.mjs - drives `capcall mcp` with the official MCP TypeScript
// SDK (tests/integration/45-client-mcp-sdk.sh installs it and sets the
// environment).  Prints one line per check: "T 0 title" (pass) or
// "T 1 title" followed by "# detail" lines; the shell turns them into TAP.
//
// Environment: SDK (the npm prefix holding node_modules), CB (capbroker),
// CTL (capctl), STATE (the serve state dir), SOCK (its admin socket),
// W (the workspace), POLICY, PORT_OK / PORT_NO (local TCP ports: one
// granted, one not).
import path from "node:path";
import net from "node:net";
import { execFileSync } from "node:child_process";

const env = process.env;
const sdk = (p) => import(path.join(env.SDK, "node_modules/@modelcontextprotocol/sdk/dist/esm", p));
const { Client } = await sdk("client/index.js");
const { StdioClientTransport } = await sdk("client/stdio.js");
const { ToolListChangedNotificationSchema } = await sdk("types.js");

let failed = 0;
function check(title, cond, detail) {
  console.log(`T ${cond ? 0 : 1} ${title}`);
  if (!cond) {
    failed++;
    if (detail !== undefined)
      for (const l of String(typeof detail === "string" ? detail : JSON.stringify(detail)).split("\n").slice(0, 12))
        console.log(`# ${l}`);
  }
}
const text = (r) => (r.content || []).map((c) => c.text || "").join("");
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ctl = (...a) => execFileSync(env.CTL, ["--state", env.STATE, ...a], { encoding: "utf8" });
async function until(what, fn, ms = 10000) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) {
    const v = await fn();
    if (v) return v;
  }
  throw new Error(`timed out waiting for ${what}`);
}

// A local peer for connect: answers "pong:" + what it got, then closes.
const peer = net.createServer((s) => {
  let got = "";
  s.on("data", (d) => (got += d));
  s.on("end", () => s.end("pong:" + got));
  s.on("error", () => {});
});
await new Promise((r) => peer.listen(Number(env.PORT_OK), "127.0.0.1", r));

const W = env.W;
const transport = new StdioClientTransport({
  command: env.CB,
  args: ["run", "--connect", env.SOCK, "--id", "mcp1", "--tier", "medium", "--workspace", W,
    "--grant", `fs.read:${W}/**`, "--grant", `fs.list:${W}/**`, "--grant", `fs.write:${W}/out/**`,
    "--grant", `fs.delete:${W}/out/**`, "--grant", "proc.exec:/usr/bin/cat",
    "--grant", `net.connect:127.0.0.1:${env.PORT_OK}`, "--", "capcall", "mcp", "--poll-ms", "200"],
  stderr: "inherit",
});
const client = new Client({ name: "capbroker-test", version: "1.0" });
const protoErrors = [];
client.onerror = (e) => protoErrors.push(String(e));
let changed = 0;
client.setNotificationHandler(ToolListChangedNotificationSchema, () => { changed++; });
await client.connect(transport);

check("initialize: the server names itself", client.getServerVersion()?.name === "capbroker",
  client.getServerVersion());
check("initialize: tools with listChanged", client.getServerCapabilities()?.tools?.listChanged === true,
  client.getServerCapabilities());
await client.ping();
check("ping answers", true);

let { tools } = await client.listTools();
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
check("tools/list: exactly the ten tools",
  JSON.stringify(tools.map((t) => t.name).sort()) === JSON.stringify(["capabilities", "connect", "delete",
    "exec", "list_directory", "make_directory", "read_file", "request_capability", "stat", "write_file"]),
  tools.map((t) => t.name));
check("read_file's description names the granted root", byName.read_file.description.includes(`${W}/**`),
  byName.read_file.description);
check("... and so does its path argument", byName.read_file.inputSchema.properties.path.description.includes(`${W}/**`));
check("exec's description names the granted program", byName.exec.description.includes("/usr/bin/cat"));
check("connect's description names the granted host:port",
  byName.connect.description.includes(`127.0.0.1:${env.PORT_OK}`), byName.connect.description);
check("read_file is readOnly, not destructive",
  byName.read_file.annotations.readOnlyHint === true && byName.read_file.annotations.destructiveHint === false);
check("write_file and delete are destructive",
  byName.write_file.annotations.destructiveHint === true && byName.delete.annotations.destructiveHint === true &&
  byName.write_file.annotations.readOnlyHint === false);
check("every tool has an object inputSchema",
  tools.every((t) => t.inputSchema.type === "object"));

const call = (name, args) => client.callTool({ name, arguments: args });
async function allowed(title, name, args, want) {
  const r = await call(name, args);
  check(`${name} allowed: ${title}`, !r.isError && r.structuredContent?.ok === true && (!want || want(r)), r);
  return r;
}
async function denied(name, args, cap) {
  const r = await call(name, args);
  check(`${name} denied: isError, names ${cap}, says how to ask`,
    r.isError === true && text(r).includes(cap) && text(r).includes("request_capability") &&
    r.structuredContent?.capability === cap, r);
}

await allowed("reads the file", "read_file", { path: `${W}/a.txt` }, (r) => text(r) === "hello\n" &&
  r.structuredContent.content === "hello\n");
await allowed("binary comes back base64", "read_file", { path: `${W}/bin` },
  (r) => r.structuredContent.content_encoding === "base64" && r.structuredContent.content === "AP8B");
await allowed("writes", "write_file", { path: `${W}/out/new.txt`, content: "written\n" },
  (r) => r.structuredContent.bytes === 8);
await allowed("lists", "list_directory", { path: W },
  (r) => r.structuredContent.entries.some((e) => e.name === "a.txt" && e.type === "file") &&
    r.structuredContent.entries.some((e) => e.name === "out" && e.type === "dir"));
await allowed("stats", "stat", { path: `${W}/a.txt` },
  (r) => r.structuredContent.type === "file" && r.structuredContent.size === 6);
await allowed("makes a directory", "make_directory", { path: `${W}/out/sub` });
await allowed("deletes", "delete", { path: `${W}/out/sub` });
await allowed("runs cat with stdin", "exec", { argv: ["/usr/bin/cat"], stdin: "through stdin" },
  (r) => r.structuredContent.status === 0 && r.structuredContent.stdout === "through stdin");
await allowed("exchanges bytes with the granted peer", "connect",
  { host: "127.0.0.1", port: Number(env.PORT_OK), send: "ping" },
  (r) => r.structuredContent.data === "pong:ping" && r.structuredContent.closed === true);
const caps = await allowed("lists the held tokens", "capabilities", {},
  (r) => r.structuredContent.tokens.length === 6 && r.structuredContent.allowed["proc.exec"][0] === "/usr/bin/cat");

await denied("read_file", { path: "/etc/hostname" }, "fs.read:/etc/hostname");
await denied("write_file", { path: `${W}/a.txt`, content: "x" }, `fs.write:${W}/a.txt`);
await denied("list_directory", { path: "/etc" }, "fs.list:/etc");
await denied("stat", { path: "/etc/hostname" }, "fs.read:/etc/hostname");
await denied("make_directory", { path: `${W}/nope` }, `fs.write:${W}/nope`);
await denied("delete", { path: `${W}/a.txt` }, `fs.delete:${W}/a.txt`);
await denied("exec", { argv: ["/usr/bin/wc", "-l"] }, "proc.exec:/usr/bin/wc");
await denied("connect", { host: "127.0.0.1", port: Number(env.PORT_NO) }, `net.connect:127.0.0.1:${env.PORT_NO}`);
{
  const r = await call("read_file", { path: 42 });
  check("a wrong argument type is a tool error, not a crash", r.isError === true && /path/.test(text(r)), r);
  let e;
  try { await call("no_such_tool", {}); } catch (x) { e = x; }
  check("an unknown tool is a JSON-RPC error (-32602)", e && e.code === -32602, String(e));
}

// request_capability, approved by an administrator with capctl.
changed = 0;
const pending = call("request_capability", { capability: "fs.read:/etc/hostname", ttl: 60,
  reason: "the SDK test needs the host name" });
const rid = await until("the pending request", () => {
  const p = JSON.parse(ctl("--json", "pending"));
  const r = p.find((x) => x.cap === "fs.read:/etc/hostname" && x.sandbox === "mcp1");
  return r && String(r.rid);
});
check("the request is pending for a human, with its reason",
  JSON.parse(ctl("--json", "pending")).some((x) => x.reason === "the SDK test needs the host name"));
await client.ping();
await allowed("served while the request waits for a human", "stat", { path: `${W}/a.txt` });
ctl("approve", rid);
const granted = await pending;
check("request_capability: approved through capctl approve", !granted.isError &&
  granted.structuredContent.granted === true && /^[0-9a-f]{32}$/.test(granted.structuredContent.token_id), granted);
await until("list_changed after the approval", () => changed > 0, 5000).catch(() => {});
check("... and tools/list_changed followed", changed > 0);
await allowed("reads /etc/hostname after approval", "read_file", { path: "/etc/hostname" },
  (r) => r.structuredContent.bytes > 0);
({ tools } = await client.listTools());
check("read_file's description now lists /etc/hostname",
  tools.find((t) => t.name === "read_file").description.includes("/etc/hostname"));

// Revoked by an administrator: the server notices on its own.
changed = 0;
ctl("revoke", granted.structuredContent.token_id);
let got = true;
await until("list_changed after the revoke", () => changed > 0, 5000).catch(() => { got = false; });
check("capctl revoke: tools/list_changed arrives without a call", got);
({ tools } = await client.listTools());
check("... and read_file's description no longer lists /etc/hostname",
  !tools.find((t) => t.name === "read_file").description.includes("/etc/hostname"));
{
  const r = await call("read_file", { path: "/etc/hostname" });
  check("... and the read is refused again", r.isError === true && text(r).includes("fs.read:/etc/hostname"), r);
}

// A denied request is a tool error that says so.
{
  const p = call("request_capability", { capability: "fs.read:/etc/passwd", reason: "no" });
  const rid2 = await until("the second request", () => {
    const r = JSON.parse(ctl("--json", "pending")).find((x) => x.cap === "fs.read:/etc/passwd");
    return r && String(r.rid);
  });
  ctl("deny", rid2, "--reason", "not for tests");
  const r = await p;
  check("request_capability denied: isError with the human's reason",
    r.isError === true && text(r).includes("not for tests") && r.structuredContent.granted === false, r);
}

check("the SDK saw no protocol error (stdout carried protocol only)", protoErrors.length === 0, protoErrors);
await client.close();
peer.close();
process.exit(failed ? 1 : 0);
