// The live stream (`text/event-stream`) through the typed client: a token of its own connects,
// filtered to the check's mower; a state reported then arrives as a `state` event, and revoking the
// token ends the stream with `end`.

import {
  type Api,
  type Query,
  type Schemas,
  check,
  client,
  eq,
  fail,
  log,
  noContent,
  ok,
  sameInstant,
} from "./support.js";

interface ServerSentEvent {
  event: string;
  id: string | null;
  data: string;
}

/** The events of a `text/event-stream` body, as they arrive (comments skipped). */
async function* events(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true }).replaceAll("\r\n", "\n");
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event: ServerSentEvent = { event: "message", id: null, data: "" };
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event.event = value;
        else if (field === "id") event.id = value;
        else if (field === "data") data.push(value);
      }
      if (data.length > 0 || event.event !== "message") {
        event.data = data.join("\n");
        yield event;
      }
    }
  }
}

/** The next event named `name`, skipping others; fails if the stream ends first. */
async function until(stream: AsyncGenerator<ServerSentEvent>, name: string): Promise<ServerSentEvent> {
  for (;;) {
    const next = await stream.next();
    if (next.done) fail(`live_stream ended before an event ${name}`);
    if (next.value.event === name) return next.value;
  }
}

export async function liveStream(
  baseUrl: string,
  api: Api,
  account: Schemas["Account"],
  mower: Schemas["MowerSummary"],
): Promise<void> {
  const watcher: Schemas["CreatedToken"] = await ok(
    "create_token",
    api.POST("/v1/tokens", { body: { name: "stream", scopes: ["read"] } satisfies Schemas["NewTokenRequest"] }),
    201,
  );
  const streamApi = client(baseUrl, watcher.token);
  const connected = await streamApi.GET("/v1/live/stream", {
    params: { query: { mowers: mower.id, kinds: "state" } satisfies Query<"/v1/live/stream"> },
    parseAs: "stream",
  });
  eq(connected.response.status, 200, "live_stream: status");
  eq(connected.response.headers.get("content-type")?.split(";")[0], "text/event-stream", "live_stream: content type");
  check(connected.data != null, "live_stream: no body");
  const stream = events(connected.data);

  const report: Schemas["StateReportIn"] = {
    mower_id: mower.id,
    account_id: account.id,
    observed_at: new Date(Math.floor(Date.now() / 1000) * 1000).toISOString(),
    activity: "docked",
    battery_percent: 77,
  };
  const ingest = await ok("record_states", api.POST("/v1/states", { body: [report] }));
  eq(ingest.stored, 1, "record_states while streaming");
  const stateEvent = await until(stream, "state");
  check(stateEvent.id !== null, "live_stream: a state event without id");
  const state = JSON.parse(stateEvent.data) as Schemas["MowerState"];
  eq([state.mower_id, state.activity, state.battery_percent], [mower.id, "docked", 77], "live_stream: the state");
  sameInstant(state.observed_at, report.observed_at, "live_stream: the state's observed_at");

  await noContent("revoke_token", api.DELETE("/v1/tokens/{id}", { params: { path: { id: watcher.id } } }));
  const end = await until(stream, "end");
  check((await stream.next()).done === true, "live_stream: an event after end");
  eq(JSON.parse(end.data), { reason: "token_revoked" }, "live_stream: the end event's data");
  log("Live stream: the reported state arrived as a state event; revoking the token ended the stream with end.");
}
