import { test } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import {
  AuthenticationFailed,
  Conflict,
  EngramClient,
  InvalidInput,
  NotFound,
  OPERATION_METHODS,
  OPERATIONS,
  PermissionDenied,
  TransportError,
} from "../dist/index.js";
import { client, env, unique } from "./helpers.mjs";

const METHODS = ["get", "put", "post", "delete", "patch"];

test("every operation of the live schema has a typed method of the client", async () => {
  const schema = JSON.parse(await readFile(env.schema, "utf8"));
  const live = [];
  for (const [path, item] of Object.entries(schema.paths)) {
    for (const method of METHODS) if (item[method]) live.push([item[method].operationId, method.toUpperCase(), path]);
  }
  const engram = client();
  const missing = [];
  for (const [id, method, path] of live) {
    assert.deepEqual(OPERATIONS[id], { method, path }, `${id}: the generated table is stale (npm run generate)`);
    const name = OPERATION_METHODS[id];
    const fn = name?.split(".").reduce((o, part) => o?.[part], engram);
    if (typeof fn !== "function") missing.push(id);
  }
  assert.deepEqual(missing, [], "operations without a method of EngramClient (add them to src/engram.ts)");
  assert.deepEqual(Object.keys(OPERATION_METHODS).sort(), live.map(([id]) => id).sort());
});

test("memories: store, read back, search, list; bad input names the field", async () => {
  const engram = client();
  const me = await engram.me();
  assert.equal(typeof me.agent, "string");
  const tag = unique("ts");
  const written = await engram.memories.create({ content: `The Porto office opens at nine (${tag})`, tags: [tag] });
  const id = written.id;
  const got = await engram.memories.get(String(id));
  assert.match(got.content, /Porto office/);
  const found = await engram.memories.search({ query: "When does the Porto office open?", k: 3 });
  assert.ok(found.results.some((r) => r.memory.id === id), JSON.stringify(found).slice(0, 400));
  const page = await engram.memories.list({ tag, limit: 10 });
  assert.deepEqual(page.results.map((m) => m.id), [id]);

  const bad = await engram.memories.create({ content: "" }).catch((e) => e);
  assert.ok(bad instanceof InvalidInput, String(bad));
  assert.equal(bad.status, 400);
  assert.equal(bad.code, "invalid");
  assert.ok("content" in bad.errors, JSON.stringify(bad.body));

  const missing = await engram.memories.get("999999999").catch((e) => e);
  assert.ok(missing instanceof NotFound, String(missing));
});

test("another tenant's key sees nothing; a read-only key may not write; a bad key is refused", async () => {
  const written = await client().memories.create({ content: `Only for tenant A ${unique("x")}` });
  const stranger = await client(env.otherTenantKey).memories.get(String(written.id)).catch((e) => e);
  assert.ok(stranger instanceof NotFound, String(stranger));
  const readOnly = await client(env.readOnlyKey).memories.create({ content: "nope" }).catch((e) => e);
  assert.ok(readOnly instanceof PermissionDenied, String(readOnly));
  const anonymous = await client("egk_not-a-key").me().catch((e) => e);
  assert.ok(anonymous instanceof AuthenticationFailed, String(anonymous));
  assert.equal(anonymous.status, 401);
});

test("events and facts: append, list, assert; a bad timestamp names its path", async () => {
  const engram = client();
  const session = unique("s");
  const now = new Date().toISOString();
  await engram.events.append([
    { session_id: session, kind: "message", role: "user", content: "hello", occurred_at: now },
    { session_id: session, kind: "decision", content: "answer politely", occurred_at: now },
  ]);
  const events = await engram.events.list({ session_id: session });
  assert.deepEqual(events.results.map((e) => e.kind), ["message", "decision"]);
  const bad = await engram.events.append([{ session_id: session, kind: "message", occurred_at: "yesterday" }]).catch((e) => e);
  assert.ok(bad instanceof InvalidInput, String(bad));
  assert.ok(Object.keys(bad.errors).some((k) => k.endsWith("occurred_at")), JSON.stringify(bad.errors));

  const fact = await engram.facts.assert({ subject: unique("alice"), predicate: "works_at", object: { entity: "Acme" } });
  assert.ok(fact, "a fact written");
});

test("blackboard: compare-and-set, and its event stream delivers each write", async () => {
  const engram = client();
  const execution = unique("x");
  const session = unique("s");
  const stop = new AbortController();
  const events = engram.blackboard.events(execution, { signal: stop.signal });
  const first = events.next(); // opens the stream
  // the subscription is made when the server starts the answer; give it a moment before writing
  await new Promise((r) => setTimeout(r, 500));
  const entry = await engram.blackboard.write(execution, "plan", { value: { step: 1 }, expected_version: 0, session_id: session });
  assert.equal(entry.version, 1);
  const stale = await engram.blackboard.write(execution, "plan", { value: { step: 2 }, expected_version: 0 }).catch((e) => e);
  assert.ok(stale instanceof Conflict, String(stale));
  assert.equal(stale.body.current_version, 1);
  await engram.blackboard.write(execution, "plan", { value: { step: 2 }, expected_version: 1 });

  const received = [(await first).value];
  received.push((await events.next()).value);
  assert.deepEqual(received.map((e) => e.id), [`${entry.field}@1`, `${entry.field}@2`]);
  assert.deepEqual(received.map((e) => e.entry.value), [{ step: 1 }, { step: 2 }]);
  stop.abort();
  await assert.rejects(events.next());

  const board = await engram.blackboard.read(execution);
  assert.ok(JSON.stringify(board).includes('"step":2'), JSON.stringify(board));
});

test("the event stream answers a bad key with the API's error", async () => {
  const events = client("egk_not-a-key").blackboard.events(unique("x"));
  await assert.rejects(events.next(), AuthenticationFailed);
});

test("checkpoints, context assembly and skills", async () => {
  const engram = client();
  const session = unique("s");
  const saved = await engram.checkpoints.save(session, { idempotency_key: "k1", state: { n: 1 }, plan: [] });
  assert.equal(saved.replayed, false);
  const replay = await engram.checkpoints.save(session, { idempotency_key: "k1", state: { n: 1 }, plan: [] });
  assert.equal(replay.replayed, true);
  const latest = await engram.checkpoints.latest(session);
  assert.deepEqual(latest.state, { n: 1 });
  const other = await engram.checkpoints.save(session, { idempotency_key: "k1", state: { n: 2 } }).catch((e) => e);
  assert.ok(other instanceof Conflict, String(other));

  const context = await engram.context.build({ session_id: session, query: "what is planned?", budget: 500 });
  assert.ok(context, "a context");

  const question = { type: "object", properties: { question: { type: "string" } }, required: ["question"] };
  const answer = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"] };
  const tool = await engram.tools.save({ name: "ask_user", description: "Ask the user.", input_schema: question, output_schema: answer }).catch((e) => e);
  if (tool instanceof Error) assert.fail(JSON.stringify(tool.body ?? String(tool)));
  const name = unique("skill");
  const proposed = await engram.skills.propose({
    name,
    title: "Unlock a locked account",
    intents: ["my account is locked"],
    input_schema: { type: "object", properties: {}, required: [] },
    steps: [{ id: "ask", tool: "ask_user", params: { question: "Which account is locked?" } }],
  }).catch((e) => e);
  if (proposed instanceof InvalidInput) assert.fail(JSON.stringify(proposed.body));
  const draft = await engram.skills.version(name, 1);
  assert.equal(draft.version.number, 1, JSON.stringify(draft));
  const unpublished = await engram.skills.get(name).catch((e) => e);
  assert.ok(unpublished instanceof NotFound && "name" in unpublished.errors, String(unpublished));
});

async function fakeServer(handler) {
  const server = createServer(handler);
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

test("a keyed request is retried on 503 with the same key; an unkeyed one is not", async () => {
  const keys = [];
  const hits = { get: 0 };
  const server = await fakeServer((req, res) => {
    res.setHeader("content-type", "application/json");
    if (req.method === "GET") {
      hits.get++;
      res.statusCode = 503;
      return res.end(JSON.stringify({ detail: "down", code: "unavailable", errors: {} }));
    }
    keys.push(req.headers["idempotency-key"]);
    res.statusCode = keys.length < 3 ? 503 : 201;
    res.end(JSON.stringify(keys.length < 3 ? { detail: "down", code: "unavailable", errors: {} } : { events: [] }));
  });
  try {
    const engram = new EngramClient({ baseUrl: server.url, apiKey: "k", retry: { attempts: 3, backoffMs: 1 } });
    await engram.events.append([]);
    assert.equal(keys.length, 3);
    assert.ok(keys[0] && keys.every((k) => k === keys[0]), JSON.stringify(keys));
    await assert.rejects(engram.me(), (e) => e.status === 503 && e.code === "unavailable");
    assert.equal(hits.get, 1);
  } finally {
    await server.close();
  }
});

test("a timeout is a TransportError; a cancelled call rejects with the signal's reason", async () => {
  const server = await fakeServer(() => {}); // never answers
  try {
    const engram = new EngramClient({ baseUrl: server.url, apiKey: "k", timeoutMs: 100, retry: { attempts: 1, backoffMs: 1 } });
    const late = await engram.me().catch((e) => e);
    assert.ok(late instanceof TransportError && late.timedOut, String(late));
    const stop = new AbortController();
    const call = engram.me({ signal: stop.signal, timeoutMs: 10_000 });
    stop.abort(new Error("user cancelled"));
    await assert.rejects(call, /user cancelled/);
  } finally {
    await server.close();
  }
});
