// LangGraph.js's checkpointer validation suite over EngramCheckpointSaver (run by
// tests/clients/test_typescript_client.py: `npx validate-checkpointer ./test/validation/initializer.mjs`).
// Each checkpointer the suite makes gets fresh thread ids: a saver whose thread ids carry a prefix
// of its own, so one instance never reads what an earlier one wrote (the suite's isolation rule);
// listing without a thread keeps that prefix's checkpoints, and a destroyed saver deletes its threads.
import { EngramCheckpointSaver } from "../../dist/langgraph/index.js";

const prefix = () => `v${Math.random().toString(16).slice(2, 10)}-`;

class IsolatedSaver extends EngramCheckpointSaver {
  constructor(options) {
    super(options);
    this.prefix = prefix();
    this.threads = new Set();
  }
  inner(config) {
    const c = config?.configurable;
    if (!c || c.thread_id === undefined) return config;
    return { ...config, configurable: { ...c, thread_id: this.prefix + c.thread_id } };
  }
  outer(config) {
    const c = config?.configurable;
    if (!c || typeof c.thread_id !== "string") return config;
    return { ...config, configurable: { ...c, thread_id: c.thread_id.slice(this.prefix.length) } };
  }
  outerTuple(t) {
    return t && { ...t, config: this.outer(t.config), parentConfig: t.parentConfig && this.outer(t.parentConfig) };
  }
  async getTuple(config) {
    return this.outerTuple(await super.getTuple(this.inner(config)));
  }
  async *list(config, options = {}) {
    const before = options.before && this.inner(options.before);
    if (config?.configurable?.thread_id !== undefined) {
      for await (const t of super.list(this.inner(config), { ...options, before })) yield this.outerTuple(t);
      return;
    }
    // every thread of the agent: this saver's own only (its prefix), `limit` counted among them
    let left = options.limit;
    for await (const t of super.list(config, { ...options, before, limit: undefined })) {
      if (!t.config.configurable.thread_id.startsWith(this.prefix)) continue;
      yield this.outerTuple(t);
      if (left !== undefined && --left <= 0) return;
    }
  }
  async put(config, checkpoint, metadata, versions) {
    const inner = this.inner(config);
    this.remember(inner);
    return this.outer(await super.put(inner, checkpoint, metadata, versions));
  }
  remember(config) {
    const threadId = config?.configurable?.thread_id;
    if (threadId !== undefined) this.threads.add(threadId);
  }
  /** Deletes every thread this saver wrote (the agent's listing across threads stays short). */
  async cleanup() {
    for (const threadId of this.threads) await super.deleteThread(threadId);
  }
  putWrites(config, writes, taskId, taskPath) {
    const inner = this.inner(config);
    this.remember(inner);
    return super.putWrites(inner, writes, taskId, taskPath);
  }
  deleteThread(threadId) {
    return super.deleteThread(this.prefix + threadId);
  }
}

export default {
  checkpointerName: "EngramCheckpointSaver",
  createCheckpointer() {
    return new IsolatedSaver({ baseUrl: process.env.ENGRAM_URL, apiKey: process.env.ENGRAM_KEY });
  },
  destroyCheckpointer(checkpointer) {
    return checkpointer.cleanup();
  },
};
