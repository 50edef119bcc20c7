// LangGraph.js's checkpointer validation suite over EngramCheckpointSaver (run by
// tests/clients/test_typescript_client.py: `npx validate-checkpointer ./test/validation/initializer.mjs`).
// Each checkpointer the suite makes gets fresh thread ids: a saver whose thread ids carry a prefix
// of its own, so one instance never reads what an earlier one wrote (the suite's isolation rule).
import { EngramCheckpointSaver } from "../../dist/langgraph/index.js";

const prefix = () => `v${Math.random().toString(16).slice(2, 10)}-`;

class IsolatedSaver extends EngramCheckpointSaver {
  constructor(options) {
    super(options);
    this.prefix = prefix();
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
    for await (const t of super.list(this.inner(config), { ...options, before })) yield this.outerTuple(t);
  }
  async put(config, checkpoint, metadata, versions) {
    return this.outer(await super.put(this.inner(config), checkpoint, metadata, versions));
  }
  putWrites(config, writes, taskId, taskPath) {
    return super.putWrites(this.inner(config), writes, taskId, taskPath);
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
};
