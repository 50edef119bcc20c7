// A graph that stops before "finish" and resumes from Engram in a later process, in either language:
//   ENGRAM_URL=http://localhost:8000 ENGRAM_API_KEY=egk_... node examples/resume_graph.mjs THREAD_ID
// Its Python twin is tests/clients/test_typescript_client.py's PY_GRAPH: a thread either one starts, the
// other resumes. "work" leaves `steps` as it is and nothing changes `owner` after the input: their
// values are stored once and read back at every later checkpoint.
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { EngramCheckpointSaver } from "@engram/client/langgraph";

const State = Annotation.Root({ steps: Annotation(), total: Annotation(), owner: Annotation() });

const graph = new StateGraph(State)
  .addNode("plan", (s) => ({ steps: [...s.steps, "plan"], total: s.total + 1 }))
  .addNode("work", (s) => ({ total: s.total * 10 }))
  .addNode("finish", (s) => ({ steps: [...s.steps, "finish"], total: s.total + 2 }))
  .addEdge(START, "plan")
  .addEdge("plan", "work")
  .addEdge("work", "finish")
  .addEdge("finish", END)
  .compile({
    checkpointer: new EngramCheckpointSaver({ baseUrl: process.env.ENGRAM_URL, apiKey: process.env.ENGRAM_API_KEY }),
    interruptBefore: ["finish"],
  });

const config = { configurable: { thread_id: process.argv[2] } };
const stopped = (await graph.getState(config)).next.length > 0; // a run of this thread stopped half-way
const { steps, total, owner } = await graph.invoke(stopped ? null : { steps: [], total: 1, owner: "ada" }, config);
console.log(JSON.stringify({ steps, total, owner }));
