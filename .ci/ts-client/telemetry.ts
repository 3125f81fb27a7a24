// The telemetry of the check's mower, through the typed client: states reported, then read back
// (state with its ETag, history and track page by page, the GeoJSON track against the JSON one,
// days, health), the events and alerts the watcher derives, the busy check, a blade reset, the
// live projections, and an import of older history.

import { randomUUID } from "node:crypto";
import {
  type Api,
  type Header,
  type Query,
  type Schemas,
  allPages,
  check,
  degrees,
  eq,
  log,
  noContent,
  ok,
  poll,
  sameInstant,
} from "./support.js";

export interface Mower {
  api: Api;
  account: Schemas["Account"];
  site: Schemas["Site"];
  mower: Schemas["MowerSummary"];
  zone: Schemas["Zone"];
}

/** The check's states: docked, mowing north through the zone, out of the geofence, then an error. */
function reports(mowerId: string, accountId: string, start: number): Schemas["StateReportIn"][] {
  const report = (i: number, activity: Schemas["Activity"], north: number): Schemas["StateReportIn"] => ({
    mower_id: mowerId,
    account_id: accountId,
    observed_at: new Date(start + i * 10_000).toISOString(),
    activity,
    battery_percent: 90 - i,
    blade_on: activity === "mowing",
    position: { lat: degrees(52.5, north), lon: degrees(13.4, 100), accuracy_m: 1, heading_deg: 0 },
  });
  return [
    report(0, "docked", 10),
    ...[1, 2, 3, 4, 5, 6].map((i) => report(i, "mowing", 10 + 20 * i)),
    report(7, "mowing", 500),
    { ...report(8, "error", 500), error_code: "E_LIFTED" },
  ];
}

export async function telemetry({ api, account, site, mower, zone }: Mower): Promise<void> {
  const id = { path: { id: mower.id } };
  // Whole seconds, five minutes ago: the states are recent, none in the future.
  const start = Math.floor(Date.now() / 1000) * 1000 - 300_000;
  const sent = reports(mower.id, account.id, start);
  const unknown = { ...sent[0]!, mower_id: randomUUID() };
  const ingest: Schemas["IngestResult"] = await ok(
    "record_states",
    api.POST("/v1/states", { body: [...sent, unknown] }),
  );
  eq([ingest.stored, ingest.dropped], [sent.length, 1], "record_states: stored and dropped");
  eq(
    ingest.items.map((o) => [o.index, o.outcome, o.reason]),
    [...sent.map((_, i) => [i, "stored", null]), [sent.length, "dropped", "unknown_mower"]],
    "record_states: the outcome of each report",
  );
  const last = sent[sent.length - 1]!;

  // The latest state, and its ETag.
  const state = await ok("get_mower_state", api.GET("/v1/mowers/{id}/state", { params: id }));
  sameInstant(state.observed_at, last.observed_at, "get_mower_state: observed_at");
  eq(
    [
      state.mower_id,
      state.activity,
      state.lawn_mower_activity,
      state.error_code,
      state.battery_percent,
      state.blade_on,
    ],
    [mower.id, "error", "error", "E_LIFTED", last.battery_percent, false],
    "get_mower_state",
  );
  eq([state.position?.lat, state.position?.lon], [last.position?.lat, last.position?.lon], "get_mower_state: position");
  const first = await api.GET("/v1/mowers/{id}/state", { params: id });
  const etag = first.response.headers.get("etag");
  check(etag !== null, "get_mower_state has no ETag");
  const again = await api.GET("/v1/mowers/{id}/state", {
    params: { path: { id: mower.id }, header: { "If-None-Match": etag } satisfies Header<"/v1/mowers/{id}/state"> },
  });
  eq(again.response.status, 304, "get_mower_state with its ETag in If-None-Match");
  const summary = await ok("get_mower", api.GET("/v1/mowers/{id}", { params: id }));
  eq([summary.online, summary.state?.activity], [true, "error"], "get_mower after the states: online, activity");

  // History and track, oldest first, four per page.
  const window = { from: new Date(start - 1000).toISOString(), to: new Date(start + 3_600_000).toISOString() };
  const history = await allPages("get_mower_history", (cursor) =>
    ok(
      "get_mower_history",
      api.GET("/v1/mowers/{id}/history", {
        params: {
          path: { id: mower.id },
          query: { from: window.from, to: window.to, limit: 4, cursor } satisfies Query<"/v1/mowers/{id}/history">,
        },
      }),
    ),
  );
  eq(
    history.map((p) => p.items.length),
    [4, 4, 1],
    "get_mower_history: page sizes",
  );
  const items: Schemas["HistoryItem"][] = history.flatMap((p) => p.items);
  items.forEach((item, i) => {
    sameInstant(item.observed_at, sent[i]!.observed_at, `history entry ${i}: observed_at`);
    eq(
      [item.activity, item.battery_percent, item.blade_on],
      [sent[i]!.activity, sent[i]!.battery_percent, sent[i]!.blade_on],
      `history entry ${i}`,
    );
  });
  await trackPages(api, mower.id, window, sent);

  // What the watcher derived: mowing started, the zone entered, the geofence left, the error.
  const expected: Schemas["EventKind"][] = ["mowing_started", "zone_entered", "geofence_left", "error_raised"];
  const events = await poll(
    "list_events of the mower",
    15,
    () =>
      ok(
        "list_events",
        api.GET("/v1/events", { params: { query: { mower_id: mower.id, limit: 50 } satisfies Query<"/v1/events"> } }),
      ),
    (page) => expected.every((kind) => page.items.some((e) => e.kind === kind)),
  );
  for (const event of events.items) {
    eq(event.mower_id, mower.id, `event ${event.id}: mower_id`);
    check(!Number.isNaN(Date.parse(event.observed_at)), `event ${event.id}: observed_at ${event.observed_at}`);
  }
  const times = events.items.map((e) => Date.parse(e.observed_at));
  eq(
    times,
    [...times].sort((a, b) => b - a),
    "list_events: newest first",
  );
  const errors = await ok(
    "list_events by kind",
    api.GET("/v1/events", { params: { query: { kind: "error_raised" } satisfies Query<"/v1/events"> } }),
  );
  eq(
    errors.items.map((e) => [e.kind, e.mower_id]),
    [["error_raised", mower.id]],
    "list_events?kind=error_raised",
  );
  sameInstant(errors.items[0]!.observed_at, last.observed_at, "the error_raised event: observed_at");
  const alerts = await poll(
    "list_alerts",
    15,
    () =>
      ok(
        "list_alerts",
        api.GET("/v1/alerts", { params: { query: { mower_id: mower.id } satisfies Query<"/v1/alerts"> } }),
      ),
    (page) => page.items.length >= 2,
  );
  eq(
    alerts.items.map((a) => [a.kind, a.severity, a.mower_id, a.code]).sort(),
    [
      ["error", "high", mower.id, "E_LIFTED"],
      ["geofence", "critical", mower.id, null],
    ].sort(),
    "list_alerts: the error and geofence alerts",
  );
  const zones = await ok("list_zones", api.GET("/v1/mowers/{id}/zones", { params: id }));
  eq(
    zones.items.map((z) => [z.id, z.occupied]),
    [[zone.id, false]],
    "list_zones: left again",
  );
  const busy: Schemas["Busy"] = await ok("get_busy", api.GET("/v1/mowers/{id}/busy", { params: id }));
  eq([busy.mower_id, busy.busy, busy.activity], [mower.id, true, "error"], "get_busy");
  sameInstant(busy.observed_at, last.observed_at, "get_busy: observed_at");
  log(
    `States: ${ingest.stored} stored, 1 dropped (unknown_mower); read back as state (ETag, 304), history and track ` +
      `(3 pages each, GeoJSON the same); events ${expected.join(", ")}; alerts error and geofence; busy.`,
  );

  await totals(api, mower, site, sent);
  await projections(api, site, mower);
  await importHistory(api, mower, account, start);
}

/** The JSON and the GeoJSON track, page by page: the same positions (`[lon, lat]`), times and cursors. */
async function trackPages(
  api: Api,
  mowerId: string,
  window: { from: string; to: string },
  sent: Schemas["StateReportIn"][],
): Promise<void> {
  const json: Schemas["TrackPage"][] = [];
  const geo: Schemas["TrackFeatureCollection"][] = [];
  let cursor: string | undefined;
  for (;;) {
    // Literals, not a shared variable: tsc then refuses a parameter the document no longer has.
    const page = await ok(
      "get_mower_track",
      api.GET("/v1/mowers/{id}/track", {
        params: {
          path: { id: mowerId },
          query: { from: window.from, to: window.to, limit: 4, cursor } satisfies Query<"/v1/mowers/{id}/track">,
        },
      }),
    );
    const collection = await ok(
      "get_mower_track_geojson",
      api.GET("/v1/mowers/{id}/track.geojson", {
        params: {
          path: { id: mowerId },
          query: {
            from: window.from,
            to: window.to,
            limit: 4,
            cursor,
          } satisfies Query<"/v1/mowers/{id}/track.geojson">,
        },
      }),
    );
    json.push(page);
    geo.push(collection);
    eq(collection.type, "FeatureCollection", "track.geojson: type");
    eq(collection.features.length, 1, "track.geojson: one feature per page");
    const feature = collection.features[0]!;
    const geometry: Schemas["TrackGeometry"] = feature.geometry;
    const coordinates = geometry.type === "LineString" ? geometry.coordinates : [geometry.coordinates];
    eq(geometry.type, page.items.length === 1 ? "Point" : "LineString", "track.geojson: geometry type");
    eq(
      coordinates,
      page.items.map((p) => [p.lon, p.lat]),
      "track.geojson: coordinates are the track's [lon, lat]",
    );
    eq(feature.properties.mower_id, mowerId, "track.geojson: mower_id");
    eq(
      feature.properties.times.map(Date.parse),
      page.items.map((p) => Date.parse(p.observed_at)),
      "track.geojson: times",
    );
    eq([collection.truncated, collection.next_cursor], [page.truncated, page.next_cursor], "track.geojson: paging");
    if (!page.truncated) break;
    cursor = page.next_cursor ?? undefined;
    check(cursor !== undefined && json.length < 10, "get_mower_track: a truncated page without next_cursor");
  }
  const points = json.flatMap((p) => p.items);
  eq(points.length, sent.length, "get_mower_track: positions");
  points.forEach((p, i) => {
    eq([p.lat, p.lon, p.accuracy_m], [sent[i]!.position!.lat, sent[i]!.position!.lon, 1], `track position ${i}`);
    sameInstant(p.observed_at, sent[i]!.observed_at, `track position ${i}: observed_at`);
  });
}

/** Health and day totals, and a blade reset. */
async function totals(
  api: Api,
  mower: Schemas["MowerSummary"],
  site: Schemas["Site"],
  sent: Schemas["StateReportIn"][],
): Promise<void> {
  const id = { path: { id: mower.id } };
  const health: Schemas["MowerHealth"] = await poll(
    "get_mower_health counts the states",
    15,
    () => ok("get_mower_health", api.GET("/v1/mowers/{id}/health", { params: id })),
    (h) => h.error_count >= 1,
  );
  eq([health.mower_id, health.error_count, health.blade_threshold_seconds], [mower.id, 1, 36_000], "get_mower_health");
  check(
    health.mowing_seconds > 0 && health.blade_seconds > 0,
    `get_mower_health: no mowing or blade time ${JSON.stringify(health)}`,
  );
  check(health.distance_m > 0, "get_mower_health: no distance");
  check(health.blade_since_reset_seconds > 0, "get_mower_health: no blade time since the reset");
  await noContent("reset_blade", api.POST("/v1/mowers/{id}/blade-reset", { params: id }));
  const reset = await ok("get_mower_health", api.GET("/v1/mowers/{id}/health", { params: id }));
  eq(reset.blade_since_reset_seconds, 0, "get_mower_health after reset_blade: blade_since_reset_seconds");
  eq(reset.blade_seconds, health.blade_seconds, "get_mower_health after reset_blade: blade_seconds kept");

  const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
  const days = await ok(
    "get_mower_days",
    api.GET("/v1/mowers/{id}/days", {
      params: { path: { id: mower.id }, query: { from: day(-1), to: day(1) } satisfies Query<"/v1/mowers/{id}/days"> },
    }),
  );
  eq(
    [days.mower_id, days.time_zone, days.from, days.to],
    [mower.id, site.time_zone, day(-1), day(1)],
    "get_mower_days",
  );
  const sum = (key: "state_count" | "error_count" | "mowing_seconds") => days.items.reduce((n, d) => n + d[key], 0);
  eq(
    [sum("state_count"), sum("error_count"), sum("mowing_seconds")],
    [sent.length, 1, health.mowing_seconds],
    "get_mower_days: totals",
  );
  log(
    `Totals: health (mowing ${health.mowing_seconds} s, ${health.distance_m.toFixed(1)} m, 1 error), blade reset to 0, ` +
      `days ${days.items.map((d) => d.day).join(", ")} (${sum("state_count")} states).`,
  );

  // W8: the mower's sessions add up to its health totals (every mowing state is in one).
  const sessions = await ok(
    "list_mower_sessions",
    api.GET("/v1/mowers/{id}/sessions", {
      params: { path: { id: mower.id }, query: { limit: 1000 } satisfies Query<"/v1/mowers/{id}/sessions"> },
    }),
  );
  const mowed = sessions.items.reduce((n, s) => n + s.mowing_seconds, 0);
  eq(Math.round(mowed * 1000), Math.round(health.mowing_seconds * 1000), "list_mower_sessions: mowing time");
  const fleet = await ok(
    "list_sessions",
    api.GET("/v1/sessions", {
      params: { query: { mower_id: mower.id, limit: 1000 } satisfies Query<"/v1/sessions"> },
    }),
  );
  eq(fleet.items.map((s) => s.id), sessions.items.map((s) => s.id), "list_sessions: the mower's sessions");
  const open = await ok("get_open_session", api.GET("/v1/mowers/{id}/sessions/open", { params: id }));
  eq(open.session?.id ?? null, sessions.items.find((s) => s.open)?.id ?? null, "get_open_session");
  log(`Sessions: ${sessions.items.length}, ${mowed} s of mowing, open: ${open.session !== null}.`);
}

/** The live projections: the fleet, the site wall and the health wall, and the fleet's ETag. */
async function projections(api: Api, site: Schemas["Site"], mower: Schemas["MowerSummary"]): Promise<void> {
  const fleet: Schemas["FleetDashboard"] = await ok("live_fleet", api.GET("/v1/live/fleet"));
  eq(
    fleet.mowers.items.map((m) => [m.id, m.site_id, m.name, m.activity, m.offline]),
    [[mower.id, site.id, "Ada", "error", false]],
    "live_fleet",
  );
  const live = fleet.mowers.items[0]!;
  eq(live.operator?.operator, "Grace", "live_fleet: the operator on duty");
  eq(live.alerts.items.map((a) => a.kind).sort(), ["error", "geofence"], "live_fleet: the open alerts");
  const first = await api.GET("/v1/live/fleet");
  const etag = first.response.headers.get("etag");
  check(etag !== null, "live_fleet has no ETag");
  const again = await api.GET("/v1/live/fleet", {
    params: { header: { "If-None-Match": etag } satisfies Header<"/v1/live/fleet"> },
  });
  eq(again.response.status, 304, "live_fleet with its ETag in If-None-Match");

  const wall: Schemas["SiteWall"] = await ok("live_wall", api.GET("/v1/live/wall"));
  eq(
    wall.sites.items.map((s) => [s.site.id, s.site.name, s.mowers.items.map((m) => m.id)]),
    [[site.id, site.name, [mower.id]]],
    "live_wall",
  );
  const healthWall: Schemas["HealthWall"] = await ok("live_health", api.GET("/v1/live/health"));
  eq(
    healthWall.sites.items.map((s) => [s.site.id, s.mowers.items.map((m) => m.id)]),
    [[site.id, [mower.id]]],
    "live_health",
  );
  const row = healthWall.sites.items[0]!.mowers.items[0]!;
  eq([row.open_alerts.critical, row.open_alerts.high, row.error_count], [1, 1, 1], "live_health: alerts and errors");
  log("Live projections: fleet (operator, alerts, ETag 304), site wall and health wall list the mower.");
}

/** An NDJSON body as is (openapi-fetch would send it JSON-encoded). */
function importBody(body: string) {
  return { body, bodySerializer: (text: string) => text, headers: { "Content-Type": "application/x-ndjson" } };
}

/** An import of an hour-old stretch and a malformed line: stored and merged, the line named. */
async function importHistory(
  api: Api,
  mower: Schemas["MowerSummary"],
  account: Schemas["Account"],
  start: number,
): Promise<void> {
  const older = [0, 1, 2].map((i) => ({
    mower_id: mower.id,
    account_id: account.id,
    observed_at: new Date(start - 3_600_000 + i * 10_000).toISOString(),
    activity: "docked" as const,
    battery_percent: 100,
  }));
  const body = [...older.map((r) => JSON.stringify(r)), "{not json"].join("\n") + "\n";
  const created: Schemas["ImportDocument"] = await ok("create_import", api.POST("/v1/imports", importBody(body)), 202);
  const done = await poll(
    "get_import finishes",
    15,
    () => ok("get_import", api.GET("/v1/imports/{id}", { params: { path: { id: created.id } } })),
    (doc) => doc.status !== "running",
  );
  eq(
    [done.id, done.status, done.lines, done.stored, done.counts.dropped, done.error],
    [created.id, "done", 4, 3, 1, null],
    "get_import",
  );
  // Older than the mower's newest state: new, and late (merged into the totals).
  eq(done.counts, { new: 3, late_merged: 3, late_not_counted: 0, duplicate: 0, dropped: 1 }, "get_import: counts");
  eq(
    done.bad_lines.map((b) => [b.line, b.reason]),
    [[4, "malformed"]],
    "get_import: the bad line",
  );
  eq(done.dropped_by_reason, [{ reason: "malformed", count: 1 }], "get_import: dropped by reason");
  const again = await ok("create_import again", api.POST("/v1/imports", importBody(body)), 202);
  const repeated = await poll(
    "get_import of the repeated import finishes",
    15,
    () => ok("get_import", api.GET("/v1/imports/{id}", { params: { path: { id: again.id } } })),
    (doc) => doc.status !== "running",
  );
  eq(
    [repeated.stored, repeated.counts.new, repeated.counts.duplicate],
    [3, 0, 3],
    "the same import again: stored already",
  );
  // The account's imports, newest first, one per page.
  const imports = await allPages("list_imports", (cursor) =>
    ok(
      "list_imports",
      api.GET("/v1/imports", { params: { query: { limit: 1, cursor } satisfies Query<"/v1/imports"> } }),
    ),
  );
  eq(
    imports.map((p) => p.items.map((i) => [i.id, i.status])),
    [[[again.id, "done"]], [[created.id, "done"]]],
    "list_imports: newest first, one per page",
  );
  const window = { from: new Date(start - 3_700_000).toISOString(), to: new Date(start - 1000).toISOString() };
  const imported = await ok(
    "get_mower_history",
    api.GET("/v1/mowers/{id}/history", {
      params: {
        path: { id: mower.id },
        query: { from: window.from, to: window.to } satisfies Query<"/v1/mowers/{id}/history">,
      },
    }),
  );
  eq(
    imported.items.map((i) => Date.parse(i.observed_at)),
    older.map((r) => Date.parse(r.observed_at)),
    "the imported history",
  );
  log(
    `Import ${done.id}: ${done.stored} states stored (${JSON.stringify(done.counts)}), line 4 refused as malformed; again: 3 duplicates.`,
  );
}
