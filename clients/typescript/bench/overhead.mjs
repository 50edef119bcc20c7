// p50 overhead of EngramClient over a bare fetch of the same request (target: under 1 ms).
//
//   npm run bench                                   # against a stub server in a child process
//   ENGRAM_URL=... ENGRAM_KEY=... npm run bench     # against a live Engram (GET /api/v1/me)
//
// Requests alternate (bare fetch, client) so both see the same server and machine load; the
// overhead is the median of the per-pair differences, with each side's p50 and p90.
import { spawn } from "node:child_process";
import { EngramClient } from "../dist/index.js";

const N = Number(process.env.BENCH_N ?? 2000);
const WARMUP = 200;

const STUB = `
const http = require("node:http");
const me = JSON.stringify({ agent: "bench", tenant: "bench", scopes: ["read", "write"] });
const batch = JSON.stringify({ count: 1, results: [{ id: 1, seq: 1 }] });
http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    res.writeHead(req.method === "POST" ? 201 : 200, { "content-type": "application/json" });
    res.end(req.method === "POST" ? batch : me);
  });
}).listen(0, "127.0.0.1", function () { process.stdout.write(String(this.address().port) + "\\n"); });
`;

async function stubServer() {
  const child = spawn(process.execPath, ["-e", STUB], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise((resolve) => child.stdout.once("data", (d) => resolve(String(d).trim())));
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill() };
}

const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))];

async function measure(label, bare, viaClient) {
  const pairs = [];
  for (let i = 0; i < WARMUP + N; i++) {
    const t0 = performance.now();
    await bare();
    const t1 = performance.now();
    await viaClient();
    const t2 = performance.now();
    if (i >= WARMUP) pairs.push([t1 - t0, t2 - t1]);
  }
  const fetchMs = pairs.map(([f]) => f);
  const clientMs = pairs.map(([, c]) => c);
  const diff = pairs.map(([f, c]) => c - f);
  const ms = (x) => x.toFixed(3);
  console.log(
    `${label.padEnd(28)} fetch p50 ${ms(quantile(fetchMs, 0.5))} p90 ${ms(quantile(fetchMs, 0.9))} | ` +
      `client p50 ${ms(quantile(clientMs, 0.5))} p90 ${ms(quantile(clientMs, 0.9))} | ` +
      `overhead p50 ${ms(quantile(diff, 0.5))} ms (n=${N})`,
  );
}

const live = process.env.ENGRAM_URL && process.env.ENGRAM_KEY;
const server = live ? { url: process.env.ENGRAM_URL, stop: () => {} } : await stubServer();
const key = process.env.ENGRAM_KEY ?? "egk_bench";
const engram = new EngramClient({ baseUrl: server.url, apiKey: key });
const headers = { Authorization: `Bearer ${key}` };
console.log(`node ${process.version}, ${live ? `live server ${server.url}` : "stub server (child process)"}`);
try {
  await measure(
    "GET /api/v1/me",
    async () => (await fetch(`${server.url}/api/v1/me`, { headers })).json(),
    () => engram.me(),
  );
  if (!live) {
    const events = [{ session_id: "s-1", kind: "message", content: "hello", occurred_at: new Date().toISOString() }];
    await measure(
      "POST /api/v1/events",
      async () =>
        (
          await fetch(`${server.url}/api/v1/events`, {
            method: "POST",
            headers: { ...headers, "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID() },
            body: JSON.stringify(events),
          })
        ).json(),
      () => engram.events.append(events),
    );
  }
} finally {
  server.stop();
}
