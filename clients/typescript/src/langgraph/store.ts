import {
  BaseStore,
  InvalidNamespaceError,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";
import { EngramClient } from "../engram.js";
import type { EngramClientOptions } from "../client.js";
import type { components } from "../generated/schema.js";
import { NotFound } from "../errors.js";

type StoreItem = components["schemas"]["StoreItem"];

function dotted(namespace: string[], what: string): string {
  for (const label of namespace) {
    if (typeof label !== "string" || !label || label.includes(".")) {
      throw new InvalidNamespaceError(`Invalid ${what} ${JSON.stringify(namespace)}: labels are non-empty strings without '.'.`);
    }
  }
  return namespace.join(".");
}

function item(doc: StoreItem): Item {
  return {
    namespace: doc.namespace,
    key: doc.key,
    value: doc.value,
    createdAt: new Date(doc.created_at),
    updatedAt: new Date(doc.updated_at),
  };
}

/** Options of `EngramStore`: a ready `client`, or `baseUrl` and `apiKey` for one. */
export type EngramStoreOptions = (EngramClientOptions | { client: EngramClient }) & {
  /** What a put indexes when it does not say (LangGraph's `index.fields`; default: the server's, the whole value). */
  fields?: string[];
  /** The person every item written is about (what Engram's erasures and legal holds target). */
  dataSubject?: string;
};

/**
 * LangGraph.js's `BaseStore` kept in Engram's store (`/api/v1/store/...`), shared by the tenant's
 * agents, as the Python `EngramStore`: a namespace travels as a list in bodies and joined by "." in
 * query strings; a put of `null` deletes; a search with `query` is ranked by Engram's hybrid recall
 * (the server embeds). A batch runs its operations in order. Rejects with the client's errors and
 * `InvalidNamespaceError`.
 */
export class EngramStore extends BaseStore {
  readonly client: EngramClient;
  readonly fields: string[] | undefined;
  readonly dataSubject: string;

  constructor(options: EngramStoreOptions) {
    super();
    this.client = "client" in options ? options.client : new EngramClient(options);
    this.fields = options.fields;
    this.dataSubject = options.dataSubject ?? "";
  }

  /** Run `operations` in order; one result each (see `BaseStore.batch`). */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const results: unknown[] = [];
    for (const op of operations) results.push(await this.run(op));
    return results as OperationResults<Op>;
  }

  private async run(op: Operation): Promise<unknown> {
    if ("namespacePrefix" in op) return this.searchOp(op as SearchOperation);
    if ("value" in op) return this.write(op as PutOperation);
    if ("key" in op) return this.read(op as GetOperation);
    return this.listOp(op as ListNamespacesOperation);
  }

  private async read(op: GetOperation): Promise<Item | null> {
    try {
      return item(await this.client.store.get({ namespace: dotted(op.namespace, "namespace"), key: op.key }));
    } catch (error) {
      if (error instanceof NotFound && "key" in error.errors) return null; // no such item
      throw error;
    }
  }

  private async write(op: PutOperation): Promise<void> {
    const namespace = dotted(op.namespace, "namespace");
    if (op.value === null) {
      await this.client.store.delete({ namespace, key: op.key });
      return;
    }
    const index = op.index !== undefined ? op.index : this.fields;
    await this.client.store.put({
      namespace: op.namespace,
      key: op.key,
      value: op.value,
      ...(index !== undefined ? { index } : {}),
      ...(this.dataSubject ? { data_subject: this.dataSubject } : {}),
    });
  }

  private async searchOp(op: SearchOperation): Promise<SearchItem[]> {
    const page = await this.client.store.search({
      namespace_prefix: op.namespacePrefix,
      query: op.query ?? null,
      filter: op.filter ?? {},
      limit: op.limit ?? 10,
      offset: op.offset ?? 0,
    });
    return page.results.map((doc) => ({ ...item(doc), score: doc.score ?? undefined }));
  }

  private async listOp(op: ListNamespacesOperation): Promise<string[][]> {
    const query: Record<string, string | number> = { limit: op.limit, offset: op.offset };
    for (const condition of op.matchConditions ?? []) {
      if (condition.matchType in query) throw new Error(`EngramStore takes one ${condition.matchType} condition per listing.`);
      query[condition.matchType] = dotted(condition.path, condition.matchType);
    }
    if (op.maxDepth !== undefined) query.max_depth = op.maxDepth;
    const page = await this.client.store.namespaces(query);
    return page.results;
  }
}
