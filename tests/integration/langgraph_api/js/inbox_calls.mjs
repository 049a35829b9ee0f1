// The calls Agent Inbox makes, through the real @langchain/langgraph-sdk client.
// Env: LANGGRAPH_URL, LANGGRAPH_API_KEY, ORIGIN, ANSWER_THREAD (accept), STREAM_THREAD
// (respond by stream), RESOLVE_THREAD (Mark as resolved). Prints one JSON summary.
import { Client } from "@langchain/langgraph-sdk";

const url = process.env.LANGGRAPH_URL;
const apiKey = process.env.LANGGRAPH_API_KEY;
const origin = process.env.ORIGIN;
const out = {};

// What a browser sends before a cross-origin POST with x-api-key.
const preflight = await fetch(`${url}/threads/search`, {
  method: "OPTIONS",
  headers: {
    Origin: origin,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "x-api-key,content-type",
  },
});
out.preflight = {
  status: preflight.status,
  allowOrigin: preflight.headers.get("access-control-allow-origin"),
  allowMethods: preflight.headers.get("access-control-allow-methods"),
  allowHeaders: preflight.headers.get("access-control-allow-headers"),
};

const client = new Client({ apiUrl: url, apiKey, defaultHeaders: { Origin: origin } });

const interrupted = await client.threads.search({
  status: "interrupted",
  limit: 10,
  offset: 0,
  sortBy: "created_at",
  sortOrder: "desc",
});
out.interrupted = interrupted.map((thread) => ({
  id: thread.thread_id,
  status: thread.status,
  interrupts: Object.values(thread.interrupts).flat().map((i) => i.id),
  config: Object.values(thread.interrupts).flat()[0]?.value?.[0]?.config,
}));

const state = await client.threads.getState(process.env.ANSWER_THREAD);
out.state = { next: state.next, tasks: state.tasks.map((t) => [t.name, t.interrupts.length]) };

const run = await client.runs.create(process.env.ANSWER_THREAD, "agent-team", {
  command: { resume: [{ type: "accept", args: null }] },
});
out.run = { run_id: run.run_id, status: run.status };

try {
  await client.runs.create(process.env.ANSWER_THREAD, "agent-team", {
    command: { resume: [{ type: "ignore", args: null }] },
  });
  out.second = { status: 200 };
} catch (error) {
  out.second = { status: error.status, message: String(error.message) };
}

const events = [];
for await (const part of client.runs.stream(process.env.STREAM_THREAD, "agent-team", {
  command: { resume: [{ type: "response", args: "The email goes in a cookie, prefilled next time." }] },
  streamMode: ["values", "updates"],
})) {
  events.push(part.event);
}
out.stream = events;

await client.threads.updateState(process.env.RESOLVE_THREAD, { values: null, asNode: "__end__" });
out.resolved = (await client.threads.get(process.env.RESOLVE_THREAD)).status;

console.log(JSON.stringify(out));
