import { test } from "node:test";
import assert from "node:assert/strict";
import { InvalidNamespaceError, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { InvalidInput } from "../dist/index.js";
import { EngramCheckpointSaver, EngramStore } from "../dist/langgraph/index.js";
import { env, unique } from "./helpers.mjs";

const options = () => ({ baseUrl: env.url, apiKey: env.key });

test("EngramStore: put, get, search, list namespaces, delete", async () => {
  const store = new EngramStore(options());
  const user = unique("user");
  await store.put(["prefs", user], "theme", { colour: "green", size: 3 });
  await store.put(["prefs", user], "lang", { code: "pt" });
  const item = await store.get(["prefs", user], "theme");
  assert.deepEqual(item.value, { colour: "green", size: 3 });
  assert.deepEqual(item.namespace, ["prefs", user]);
  assert.ok(item.createdAt instanceof Date);
  const found = await store.search(["prefs", user], { filter: { code: "pt" } });
  assert.deepEqual(found.map((i) => i.key), ["lang"]);
  const namespaces = await store.listNamespaces({ prefix: ["prefs", user] });
  assert.deepEqual(namespaces, [["prefs", user]]);
  await store.delete(["prefs", user], "theme");
  assert.equal(await store.get(["prefs", user], "theme"), null);
  await assert.rejects(store.put(["a.b"], "k", { x: 1 }), InvalidNamespaceError);
  const bad = await store.put(["prefs", user], "k", [1, 2]).catch((e) => e);
  assert.ok(bad instanceof InvalidInput && "value" in bad.errors, String(bad));
});

test("EngramCheckpointSaver: a thread id that is no session id is a clear error", async () => {
  const saver = new EngramCheckpointSaver(options());
  const checkpoint = { ...emptyCheckpoint(), id: uuid6(0) };
  const bad = await saver
    .put({ configurable: { thread_id: "not a session id", checkpoint_ns: "" } }, checkpoint, { source: "input", step: -1, parents: {} }, {})
    .catch((e) => e);
  assert.ok(bad instanceof InvalidInput, String(bad));
  assert.ok("session_id" in bad.errors, JSON.stringify(bad.errors));
});

test("EngramCheckpointSaver: another agent's key sees nothing of a thread", async () => {
  const owner = new EngramCheckpointSaver(options());
  const outsider = new EngramCheckpointSaver({ baseUrl: env.url, apiKey: env.otherTenantKey });
  const thread = unique("t");
  const checkpoint = { ...emptyCheckpoint(), id: uuid6(0), channel_values: { secret: "owner's" } };
  const saved = await owner.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, checkpoint, { source: "input", step: -1, parents: {} }, {});
  await owner.putWrites(saved, [["secret", "pending"]], "task-1");
  const got = await owner.getTuple({ configurable: { thread_id: thread } });
  assert.deepEqual(got.checkpoint.channel_values, { secret: "owner's" });
  assert.deepEqual(got.pendingWrites, [["task-1", "secret", "pending"]]);
  assert.equal(await outsider.getTuple({ configurable: { thread_id: thread } }), undefined);
  await owner.deleteThread(thread);
  assert.equal(await owner.getTuple({ configurable: { thread_id: thread } }), undefined);
});
