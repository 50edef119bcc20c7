import { decode, ExtensionCodec } from "@msgpack/msgpack";
import { JsonPlusSerializer } from "@langchain/langgraph-checkpoint";
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";

// The extension codes of LangGraph (Python)'s msgpack serializer (langgraph.checkpoint.serde.jsonplus).
const EXT_CONSTRUCTOR_SINGLE_ARG = 0;
const EXT_CONSTRUCTOR_POS_ARGS = 1;
const EXT_CONSTRUCTOR_KW_ARGS = 2;
const EXT_METHOD_SINGLE_ARG = 3;
const EXT_PYDANTIC_V1 = 4;
const EXT_PYDANTIC_V2 = 5;
const EXT_NUMPY_ARRAY = 6;
const EXT_DELTA_SNAPSHOT = 7;

/** A Python object as LangGraph.js's JSON form of it (what `JsonPlusSerializer` revives). */
function fromPython(module: string, name: string, args: unknown, code: number): unknown {
  if (module.startsWith("langchain_core.") && args !== null && typeof args === "object") {
    // a LangChain object (a message): LangChain's own serialized form, revived by @langchain/core/load
    const { type: _type, ...kwargs } = args as Record<string, unknown>;
    const kept = Object.fromEntries(Object.entries(kwargs).filter(([, v]) => v !== null));
    return { lc: 1, type: "constructor", id: [...module.split(".").slice(0, 2), name], kwargs: kept };
  }
  if (module === "builtins" && (name === "set" || name === "frozenset")) {
    return { lc: 2, type: "constructor", id: ["Set"], method: null, args: [args], kwargs: {} };
  }
  if (module === "collections" && name === "deque") return args;
  if (code === EXT_CONSTRUCTOR_POS_ARGS && Array.isArray(args)) return args.length === 1 ? args[0] : args;
  // a UUID, Decimal, datetime (ISO text), namedtuple / dataclass / pydantic fields: their plain value
  return args;
}

function pythonCodec(): ExtensionCodec {
  const codec = new ExtensionCodec();
  const nested = (data: Uint8Array) => decode(data, { extensionCodec: codec });
  for (const code of [
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
  ]) {
    codec.register({
      type: code,
      encode: () => null,
      decode: (data) => {
        const [module, name, args] = nested(data) as [string, string, unknown];
        return fromPython(module, name, args, code);
      },
    });
  }
  codec.register({
    type: EXT_DELTA_SNAPSHOT,
    encode: () => null,
    decode: (data) => ({ lc: 2, type: "delta_snapshot", value: nested(data) }),
  });
  codec.register({
    type: EXT_NUMPY_ARRAY,
    encode: () => null,
    decode: () => {
      throw new Error("A numpy array in a checkpoint cannot be read outside Python.");
    },
  });
  return codec;
}

/**
 * LangGraph.js's `JsonPlusSerializer`, which also reads what LangGraph (Python) writes: `msgpack`
 * (its default), `null`, `bytearray`. Writes `json` (LangGraph.js's form, which Python reads too),
 * so a thread moves between the two languages in either direction.
 */
export class CrossLanguageSerializer implements SerializerProtocol {
  private readonly json = new JsonPlusSerializer();
  private readonly codec = pythonCodec();

  dumpsTyped(data: unknown): Promise<[string, Uint8Array]> {
    return this.json.dumpsTyped(data);
  }

  async loadsTyped(type: string, data: Uint8Array | string): Promise<unknown> {
    if (type === "null") return null;
    if (type === "bytearray") return this.json.loadsTyped("bytes", data);
    if (type === "msgpack") {
      const raw = typeof data === "string" ? new TextEncoder().encode(data) : data;
      // a plain Uint8Array view (a Buffer's bytes would serialize as {type: "Buffer"})
      const bytes = new Uint8Array(raw.buffer, raw.byteOffset, raw.byteLength);
      const value = decode(bytes, { extensionCodec: this.codec });
      // through LangGraph.js's JSON reviver: LangChain objects, sets, bytes become what LangGraph.js
      // makes of its own serialized form
      const text = JSON.stringify(value, (_key, v) =>
        v instanceof Uint8Array ? { lc: 2, type: "constructor", id: ["Uint8Array"], method: "from", args: [Array.from(v)] } : v,
      );
      return this.json.loadsTyped("json", text);
    }
    return this.json.loadsTyped(type, data);
  }
}
