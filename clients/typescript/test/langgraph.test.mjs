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

test("EngramCheckpointSaver: list without a thread reads the agent's checkpoints in every session", async () => {
  const owner = new EngramCheckpointSaver(options());
  const run = unique("run");
  const [first, second] = [unique("t"), unique("t")];
  const ids = [];
  for (const [thread, ns, source] of [
    [first, "", "input"],
    [first, "child", "loop"],
    [second, "", "loop"],
  ]) {
    const checkpoint = { ...emptyCheckpoint(), id: uuid6(0), channel_values: { where: `${thread}/${ns}` } };
    await owner.put({ configurable: { thread_id: thread, checkpoint_ns: ns } }, checkpoint, { source, step: 0, parents: {}, run }, {});
    ids.push(checkpoint.id);
  }
  const listed = async (saver, config, opts = {}) => {
    const found = [];
    for await (const t of saver.list(config, { ...opts, filter: { run, ...opts.filter } })) found.push(t);
    return found;
  };
  const every = await listed(owner, undefined);
  assert.deepEqual(every.map((t) => t.checkpoint.id), [ids[2], ids[1], ids[0]]);
  assert.deepEqual(every.map((t) => t.config.configurable.thread_id), [second, first, first]);
  assert.deepEqual(every[1].checkpoint.channel_values, { where: `${first}/child` });
  const ofIds = (found) => found.map((t) => t.checkpoint.id);
  assert.deepEqual(ofIds(await listed(owner, { configurable: { checkpoint_ns: "" } })), [ids[2], ids[0]]);
  assert.deepEqual(ofIds(await listed(owner, {}, { filter: { source: "loop" } })), [ids[2], ids[1]]);
  assert.deepEqual(ofIds(await listed(owner, {}, { before: every[0].config })), [ids[1], ids[0]]);
  assert.deepEqual(ofIds(await listed(owner, {}, { limit: 1 })), [ids[2]]);
  // another agent of the tenant and an agent of another tenant see none of them
  for (const key of [env.readOnlyKey, env.otherTenantKey]) {
    assert.deepEqual(await listed(new EngramCheckpointSaver({ baseUrl: env.url, apiKey: key }), {}), []);
  }

  // the client: one page (checkpoints.all), and every page (items)
  const page = await owner.client.checkpoints.all({ metadata: JSON.stringify({ run }), limit: 2 });
  assert.equal(page.results.length, 2);
  assert.ok(page.next);
  const items = [];
  for await (const doc of owner.client.items("checkpoints_tuples_all", { query: { metadata: JSON.stringify({ run }), limit: 1 } })) {
    items.push(doc.idempotency_key);
  }
  assert.deepEqual(items, [ids[2], ids[1], ids[0]]);
  const bad = await owner.client.checkpoints.all({ before: JSON.stringify({ session_id: first }) }).catch((e) => e);
  assert.ok(bad instanceof InvalidInput && "before" in bad.errors, String(bad));
  await owner.deleteThread(first);
  await owner.deleteThread(second);
});
