import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  getCheckpointId,
  maxChannelVersion,
  TASKS,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import { EngramClient } from "../engram.js";
import type { EngramClientOptions } from "../client.js";
import type { components } from "../generated/schema.js";
import { CrossLanguageSerializer } from "./serde.js";

type TupleDoc = components["schemas"]["CheckpointTuple"];
type Serialized = components["schemas"]["SerializedValueRequest"];
type ChannelIn = components["schemas"]["ChannelInputRequest"];

// a channel named by newVersions without a value at that version (LangGraph's Postgres savers' "empty")
const EMPTY: Serialized = { type: "empty", data: "" };

const MAX_PAGE = 500;

function toBase64(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

function fromBase64(text: string): Uint8Array {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

function threadOf(config: RunnableConfig): { threadId: string; ns: string } {
  const configurable = config.configurable ?? {};
  const threadId = configurable.thread_id;
  if (threadId === undefined || threadId === null || threadId === "") {
    throw new Error("EngramCheckpointSaver needs config.configurable.thread_id (the session id).");
  }
  return { threadId: String(threadId), ns: String(configurable.checkpoint_ns ?? "") };
}

function hasThread(config: RunnableConfig | undefined): boolean {
  const threadId = config?.configurable?.thread_id;
  return threadId !== undefined && threadId !== null && threadId !== "";
}

/** Options of `EngramCheckpointSaver`: a ready `client`, or `baseUrl` and `apiKey` for one. */
export type EngramCheckpointSaverOptions = (EngramClientOptions | { client: EngramClient }) & {
  /** LangGraph's serializer (default `CrossLanguageSerializer`, which reads what Python writes). */
  serde?: SerializerProtocol;
  /** The person every checkpoint is about (what Engram's erasures and legal holds target). */
  dataSubject?: string;
};

/**
 * A LangGraph.js checkpointer that keeps its checkpoints in Engram, as one agent (its API key): the
 * same server-side model as the Python saver (`engram_client.langgraph.EngramCheckpointSaver`), so a
 * thread saved by one resumes in the other.
 *
 * - `thread_id` is an Engram session id; the checkpoints are the calling agent's own stream in it;
 * - `checkpoint_id` is the checkpoint's `idempotency_key` (a retried put is a replay; the same id
 *   with another body is a `Conflict`), its parent `parent_key`, `checkpoint_ns` the namespace,
 *   metadata JSON (filterable by the server);
 * - the checkpoint and each pending write travel as `serialized: {type, data: base64}` of the
 *   serializer's `(type, bytes)`; the server never decodes them;
 * - channel values travel apart, as LangGraph's Postgres savers store them: `channels` names each
 *   versioned channel's version and carries the value only for the versions `newVersions` names;
 *   a read returns the values of the checkpoint's versions, put back into `channel_values` (a
 *   checkpoint saved whole before reads as it was);
 * - channel versions are `<n:032>.<random:016>` strings, as the Python saver makes them.
 *
 * Rejects with the client's `EngramError` subclasses (`InvalidInput` for a thread id that is not a
 * session id) and `TransportError`.
 */
export class EngramCheckpointSaver extends BaseCheckpointSaver<string> {
  readonly client: EngramClient;
  readonly dataSubject: string;

  constructor(options: EngramCheckpointSaverOptions) {
    super(options.serde ?? new CrossLanguageSerializer());
    this.client = "client" in options ? options.client : new EngramClient(options);
    this.dataSubject = options.dataSubject ?? "";
  }

  private async serialized(value: unknown): Promise<Serialized> {
    const [type, bytes] = await this.serde.dumpsTyped(value);
    return { type, data: toBase64(bytes) };
  }

  private loaded(value: { type: string; data: string }): Promise<unknown> {
    return this.serde.loadsTyped(value.type, fromBase64(value.data));
  }

  /** The checkpoint without its versioned channels' values, and its `channels` (see `put`). */
  private async split(
    checkpoint: Checkpoint,
    newVersions: ChannelVersions,
  ): Promise<{ serialized: Serialized; channels: Record<string, ChannelIn> }> {
    const versions = checkpoint.channel_versions ?? {};
    const values = checkpoint.channel_values ?? {};
    const channels: Record<string, ChannelIn> = {};
    for (const [name, version] of Object.entries(versions)) {
      channels[name] = { version: String(version) };
      if (name in newVersions) channels[name].value = name in values ? await this.serialized(values[name]) : EMPTY;
    }
    const unversioned = Object.fromEntries(Object.entries(values).filter(([name]) => !(name in versions)));
    return { serialized: await this.serialized({ ...checkpoint, channel_values: unversioned }), channels };
  }

  /** The checkpoint of a document: `serialized` with its `channels`' values put back. */
  private async assembled(doc: TupleDoc, serialized: { type: string; data: string }): Promise<Checkpoint> {
    const checkpoint = (await this.loaded(serialized)) as Checkpoint;
    const channels = Object.entries(doc.channels ?? {});
    if (channels.length) {
      const values: Record<string, unknown> = { ...checkpoint.channel_values };
      for (const [name, channel] of channels) {
        if (channel.value && channel.value.type !== EMPTY.type) values[name] = await this.loaded(channel.value);
      }
      checkpoint.channel_values = values;
    }
    return checkpoint;
  }

  private async tupleOf(doc: TupleDoc): Promise<CheckpointTuple | undefined> {
    if (!doc.serialized) return undefined; // a checkpoint saved through the plain API, not by LangGraph
    const { session_id: threadId, checkpoint_ns: ns } = doc;
    const checkpoint = await this.assembled(doc, doc.serialized);
    if (checkpoint.v < 4 && doc.parent_key) await this.migratePendingSends(checkpoint, threadId, ns, doc.parent_key);
    const pendingWrites: CheckpointPendingWrite[] = await Promise.all(
      doc.pending_writes.map(
        async (w): Promise<CheckpointPendingWrite> => [w.task_id, w.channel, await this.loaded(w.value)],
      ),
    );
    return {
      config: { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: doc.idempotency_key } },
      checkpoint,
      metadata: doc.metadata as CheckpointMetadata,
      parentConfig: doc.parent_key
        ? { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: doc.parent_key } }
        : undefined,
      pendingWrites,
    };
  }

  /**
   * A checkpoint of format < 4 kept the sends of its step as the parent's `TASKS` writes; format 4
   * holds them in the `TASKS` channel (as LangGraph's own savers migrate them on read).
   */
  private async migratePendingSends(checkpoint: Checkpoint, threadId: string, ns: string, parentKey: string) {
    const page = await this.client.checkpoints.tuples(threadId, { checkpoint_ns: ns, key: parentKey, limit: 1 });
    const sends = await Promise.all(
      (page.results[0]?.pending_writes ?? []).filter((w) => w.channel === TASKS).map((w) => this.loaded(w.value)),
    );
    const versions = Object.values(checkpoint.channel_versions ?? {});
    checkpoint.channel_values = { ...checkpoint.channel_values, [TASKS]: sends };
    checkpoint.channel_versions = {
      ...checkpoint.channel_versions,
      [TASKS]: versions.length ? maxChannelVersion(...versions) : this.getNextVersion(undefined),
    };
  }

  /**
   * The checkpoint `config` names (`checkpoint_id`), or the latest of its namespace; `undefined` if
   * none (or `config` names no thread).
   */
  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    if (!hasThread(config)) return undefined;
    const { threadId, ns } = threadOf(config);
    const key = getCheckpointId(config);
    const page = await this.client.checkpoints.tuples(threadId, {
      checkpoint_ns: ns,
      ...(key ? { key } : {}),
      limit: 1,
    });
    for (const doc of page.results) {
      const found = await this.tupleOf(doc);
      if (found) return found;
    }
    return undefined;
  }

  /**
   * The thread's checkpoints newest first (of its namespace when `config` names one, else of all),
   * those whose metadata holds `filter`, saved before `before`, at most `limit`. Without a
   * `thread_id`, the agent's checkpoints in every session, newest saved first (`before` then names
   * its thread too).
   */
  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const configurable = config?.configurable ?? {};
    const { filter, before, limit } = options;
    const beforeId = before ? getCheckpointId(before) : undefined;
    const common = {
      ...(configurable.checkpoint_ns !== undefined ? { checkpoint_ns: String(configurable.checkpoint_ns ?? "") } : {}),
      ...(filter && Object.keys(filter).length ? { metadata: JSON.stringify(filter) } : {}),
      ...(limit !== undefined ? { limit: Math.max(1, Math.min(limit, MAX_PAGE)) } : {}),
    };
    const docs = hasThread(config)
      ? this.client.items("checkpoints_tuples", {
          path: { session_id: threadOf(config).threadId },
          query: {
            ...common,
            ...(configurable.checkpoint_id ? { key: String(configurable.checkpoint_id) } : {}),
            ...(beforeId ? { before: beforeId } : {}),
          },
        })
      : this.client.items("checkpoints_tuples_all", {
          query: {
            ...common,
            ...(beforeId ? { before: JSON.stringify({ session_id: threadOf(before!).threadId, key: beforeId }) } : {}),
          },
        });
    let left = limit;
    for await (const doc of docs) {
      const found = await this.tupleOf(doc);
      if (!found) continue;
      yield found;
      if (left !== undefined && --left <= 0) return;
    }
  }

  /**
   * Save `checkpoint` as the next checkpoint of the thread's stream, with the values of the channels
   * `newVersions` names only (the others are stored at their versions already).
   */
  async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const { threadId, ns } = threadOf(config);
    const { serialized, channels } = await this.split(checkpoint, newVersions ?? {});
    await this.client.checkpoints.save(
      threadId,
      {
        idempotency_key: checkpoint.id,
        checkpoint_ns: ns,
        parent_key: getCheckpointId(config) || "",
        // metadata is filtered on by the server, so it travels as JSON (not through the serializer)
        metadata: JSON.parse(JSON.stringify(metadata ?? {})),
        serialized,
        channels,
        ...(this.dataSubject ? { data_subject: this.dataSubject } : {}),
      },
      { idempotencyKey: null },
    );
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  /** Store a task's writes against the checkpoint `config` names (LangGraph's `idx` rule, server-side). */
  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ""): Promise<void> {
    if (!writes.length) return;
    const { threadId, ns } = threadOf(config);
    const key = getCheckpointId(config);
    if (!key) throw new Error("putWrites needs config.configurable.checkpoint_id.");
    await this.client.checkpoints.writes(
      threadId,
      {
        key,
        checkpoint_ns: ns,
        task_id: taskId,
        task_path: taskPath,
        writes: await Promise.all(
          writes.map(async ([channel, value]) => ({ channel, value: await this.serialized(value) })),
        ),
      },
      { idempotencyKey: null },
    );
  }

  /** Delete the caller's checkpoints and writes in the session `threadId` (recorded in its trail). */
  async deleteThread(threadId: string): Promise<void> {
    await this.client.checkpoints.delete(String(threadId));
  }

  /** Versions as `<n:032>.<random:016>` strings, as the Python saver and LangGraph's own make them. */
  getNextVersion(current: string | undefined): string {
    const n = current === undefined ? 0 : parseInt(String(current).split(".")[0], 10);
    return `${String(n + 1).padStart(32, "0")}.${Math.random().toFixed(16)}`;
  }
}
