// Reads a value LangGraph (Python) serialized ("TYPE BASE64" on stdin), prints how it arrived, and
// serializes LangGraph.js values for Python: tests/clients/test_typescript_client.py drives it.
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { CrossLanguageSerializer } from "../../dist/langgraph/index.js";

const serde = new CrossLanguageSerializer();
const input = (await new Response(process.stdin).text()).trim().split(" ");
const value = await serde.loadsTyped(input[0], Buffer.from(input[1], "base64"));
const described = {
  messages: value.messages.map((m) => [m.constructor.name, m.content, m.id]),
  seen: value.seen instanceof Set ? [...value.seen].sort() : "not a Set",
  raw: value.raw instanceof Uint8Array ? [...value.raw] : "not bytes",
  nothing: value.nothing,
};
const [type, bytes] = await serde.dumpsTyped({
  messages: [new HumanMessage({ content: "hi", id: "h1" }), new AIMessage({ content: "hello", id: "a1" })],
  list: [1, "a"],
});
console.log(JSON.stringify({ described, back: [type, Buffer.from(bytes).toString("base64")] }));
