// A TypeScript client generated from openapi/openapi.json (openapi-typescript's types, openapi-fetch)
// against a running swath: every operation of the document at least once, through the typed
// client only. tsc checks this file against the generated types (every request literal
// `satisfies` its type), so a document that no longer has an operation, a parameter or a field
// used here fails CI before anything runs; the run then checks the values the service answers.
//
// It makes an account of its own (a tenant nothing else on the server sees), and in it tokens, a
// site and mowers, a geofence, a zone and an assignment; reports states, reads them back (state
// and its ETag, history, the track as JSON and as GeoJSON page by page, days, health), the events
// and alerts the watcher derives, the busy check, a blade reset, the live projections and the
// live stream; imports history; manages a webhook endpoint (webhooks.ts); and checks problems
// (401, 403, 404, 409, 422). With the server's demo token it reads the operations endpoints and
// pages through the simulated fleet. Events are read by `id`, `kind`, `mower_id` and
// `observed_at` only, not by `details`.
//
// Usage: node build/check.js BASE_URL TOKEN OPENAPI_JSON

import { readFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { randomUUID } from "node:crypto";
import {
  type Api,
  type Query,
  type Schemas,
  allPages,
  check,
  CheckFailed,
  client,
  degrees,
  eq,
  log,
  noContent,
  ok,
  okText,
  problem,
} from "./support.js";
import { liveStream } from "./stream.js";
import { telemetry } from "./telemetry.js";
import { webhooks } from "./webhooks.js";

const [baseUrl, demoToken, documentPath] = process.argv.slice(2);
if (!baseUrl || !demoToken || !documentPath) {
  console.error("usage: check.js BASE_URL TOKEN OPENAPI_JSON");
  process.exit(2);
}

/** Where the mowers of the check are: a small square of 52.5 N, 13.4 E, in 1e-5 degree steps. */
const at = (north: number, east: number): [number, number] => [degrees(13.4, east), degrees(52.5, north)];
function square(from: number, to: number): Schemas["PolygonGeometry"] {
  return {
    type: "Polygon",
    coordinates: [[at(from, from), at(from, to), at(to, to), at(to, from), at(from, from)]],
  };
}

/** Where two JSON documents differ (JSON pointers, the first differing level of each branch). */
function differences(a: unknown, b: unknown, at: string): string[] {
  if (isDeepStrictEqual(a, b)) return [];
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null || Array.isArray(a)) {
    return [at || "/"];
  }
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  return [...keys].flatMap((key) =>
    differences(
      (a as Record<string, unknown>)[key],
      (b as Record<string, unknown>)[key],
      `${at}/${key.replaceAll("~", "~0").replaceAll("/", "~1")}`,
    ),
  );
}

async function operations(api: Api): Promise<void> {
  eq(await okText("healthz", api.GET("/healthz", { parseAs: "text" })), "ok", "healthz");
  const ready: Schemas["Readiness"] = await ok("readyz", api.GET("/readyz"));
  eq([ready.store, ready.bus, ready.ingest], ["up", "up", "up"], "readyz");
  const metrics = await okText("metrics", api.GET("/metrics", { parseAs: "text" }));
  check(metrics.includes("# TYPE "), "metrics has no Prometheus TYPE line");
  const served = await ok("openapi", api.GET("/openapi.json"));
  const committed = JSON.parse(readFileSync(documentPath!, "utf8")) as Record<string, unknown>;
  const differ = differences(served, committed, "");
  check(differ.length === 0, `the served document differs from the committed one at ${differ.slice(0, 10).join(", ")}`);
  log(`Operations: healthz, readyz, metrics, and the served document is the committed one.`);
}

/** The demo account: who it is, and its simulated fleet paged three at a time as one page. */
async function demoFleet(demo: Api): Promise<void> {
  const me: Schemas["Me"] = await ok("get_me", demo.GET("/v1/me"));
  eq([...me.scopes].sort(), ["admin", "read", "write"], "the demo token's scopes");
  const accounts = await ok("list_accounts", demo.GET("/v1/accounts"));
  eq(accounts.items, [me.account], "list_accounts: the token's own account only");
  eq(
    await ok("get_account", demo.GET("/v1/accounts/{id}", { params: { path: { id: me.account.id } } })),
    me.account,
    "get_account",
  );
  const whole: Schemas["MowerList"] = await ok(
    "list_mowers",
    demo.GET("/v1/mowers", { params: { query: { limit: 1000 } satisfies Query<"/v1/mowers"> } }),
  );
  check(whole.items.length > 0 && !whole.truncated, "the simulated fleet: no mower, or more than one page");
  const pages = await allPages("list_mowers by 3", (cursor) =>
    ok(
      "list_mowers",
      demo.GET("/v1/mowers", { params: { query: { limit: 3, cursor } satisfies Query<"/v1/mowers"> } }),
    ),
  );
  eq(
    pages.flatMap((p) => p.items.map((m) => m.id)),
    whole.items.map((m) => m.id),
    "the mowers paged by 3 against one page",
  );
  log(
    `Demo account ${me.account.name}: ${whole.items.length} simulated mowers, the same paged by 3 (${pages.length} pages).`,
  );
}

interface Tenant {
  api: Api;
  account: Schemas["Account"];
}

/** A new account (a tenant of its own) and its tokens: create, list, read, a read-only one refused a write, revoked. */
async function tenant(demo: Api): Promise<Tenant> {
  const created: Schemas["CreatedAccount"] = await ok(
    "create_account",
    demo.POST("/v1/accounts", { body: { name: "TypeScript check" } satisfies Schemas["NewAccount"] }),
    201,
  );
  eq(created.account.name, "TypeScript check", "create_account: name");
  eq([...created.token.scopes].sort(), ["admin", "read", "write"], "the first token's scopes");
  eq(created.token.sites, null, "the first token's sites");
  const api = client(baseUrl!, created.token.token);
  const me = await ok("get_me (new account)", api.GET("/v1/me"));
  eq(me.account, created.account, "get_me with the new account's token");
  await problem(
    "get_account of another account",
    demo.GET("/v1/accounts/{id}", { params: { path: { id: created.account.id } } }),
    404,
  );

  const reader: Schemas["CreatedToken"] = await ok(
    "create_token",
    api.POST("/v1/tokens", { body: { name: "reader", scopes: ["read"] } satisfies Schemas["NewTokenRequest"] }),
    201,
  );
  eq(reader.scopes, ["read"], "create_token: scopes");
  const token: Schemas["Token"] = await ok(
    "get_token",
    api.GET("/v1/tokens/{id}", { params: { path: { id: reader.id } } }),
  );
  eq([token.id, token.name, token.scopes, token.sites], [reader.id, "reader", ["read"], null], "get_token");
  const tokens = await ok(
    "list_tokens",
    api.GET("/v1/tokens", { params: { query: { limit: 10 } satisfies Query<"/v1/tokens"> } }),
  );
  eq(
    tokens.items.map((t) => t.id).sort(),
    [created.token.id, reader.id].sort(),
    "list_tokens: the first token and the reader",
  );
  const readerApi = client(baseUrl!, reader.token);
  await problem(
    "create_site with a read token",
    readerApi.POST("/v1/sites", { body: { name: "Refused", time_zone: "UTC" } satisfies Schemas["NewSite"] }),
    403,
  );
  await noContent("revoke_token", api.DELETE("/v1/tokens/{id}", { params: { path: { id: reader.id } } }));
  await problem("get_me with a revoked token", readerApi.GET("/v1/me"), 401);
  log(
    `Account ${created.account.id}: created with its first token; a read token listed, read, refused a write, revoked.`,
  );
  return { api, account: created.account };
}

interface Directory {
  site: Schemas["Site"];
  mower: Schemas["MowerSummary"];
}

/** Sites and mowers: create, read, update, list, delete, and the 404 and 422 problems. */
async function directory(api: Api): Promise<Directory> {
  const created: Schemas["Site"] = await ok(
    "create_site",
    api.POST("/v1/sites", {
      body: { name: "Park", time_zone: "Europe/Berlin", display_order: 2 } satisfies Schemas["NewSite"],
    }),
    201,
  );
  eq([created.name, created.time_zone, created.display_order], ["Park", "Europe/Berlin", 2], "create_site");
  const site = await ok(
    "update_site",
    api.PATCH("/v1/sites/{id}", {
      params: { path: { id: created.id } },
      body: { name: "City park" } satisfies Schemas["SitePatch"],
    }),
  );
  eq(site, { ...created, name: "City park" }, "update_site");
  eq(await ok("get_site", api.GET("/v1/sites/{id}", { params: { path: { id: site.id } } })), site, "get_site");
  const problem422 = await problem(
    "create_site in an unknown time zone",
    api.POST("/v1/sites", { body: { name: "Nowhere", time_zone: "Mars/Olympus_Mons" } satisfies Schemas["NewSite"] }),
    422,
  );

  const mower: Schemas["MowerSummary"] = await ok(
    "create_mower",
    api.POST("/v1/mowers", {
      body: {
        site_id: site.id,
        name: "Ada",
        model: "M1",
        serial: `TS-${randomUUID()}`,
        blade_threshold_seconds: 36_000,
      } satisfies Schemas["NewMower"],
    }),
    201,
  );
  eq(
    [mower.site_id, mower.site_name, mower.name, mower.blade_threshold_seconds, mower.online, mower.state],
    [site.id, "City park", "Ada", 36_000, false, null],
    "create_mower",
  );
  const updated = await ok(
    "update_mower",
    api.PATCH("/v1/mowers/{id}", {
      params: { path: { id: mower.id } },
      body: { display_order: 5 } satisfies Schemas["MowerPatch"],
    }),
  );
  eq(updated.display_order, 5, "update_mower: display_order");
  const got = await ok("get_mower", api.GET("/v1/mowers/{id}", { params: { path: { id: mower.id } } }));
  eq([got.id, got.display_order, got.serial], [mower.id, 5, mower.serial], "get_mower");

  // A second site and mower, deleted: the site refuses while it has a mower.
  const spare = await ok(
    "create_site",
    api.POST("/v1/sites", { body: { name: "Spare", time_zone: "UTC" } satisfies Schemas["NewSite"] }),
    201,
  );
  const doomed = await ok(
    "create_mower",
    api.POST("/v1/mowers", {
      body: { site_id: spare.id, name: "Bob", model: "M1", serial: `TS-${randomUUID()}` } satisfies Schemas["NewMower"],
    }),
    201,
  );
  const sites = await ok(
    "list_sites",
    api.GET("/v1/sites", { params: { query: { limit: 10 } satisfies Query<"/v1/sites"> } }),
  );
  eq(sites.items.map((s) => s.id).sort(), [site.id, spare.id].sort(), "list_sites");
  await problem("delete_site with a mower", api.DELETE("/v1/sites/{id}", { params: { path: { id: spare.id } } }), 409);
  await noContent("delete_mower", api.DELETE("/v1/mowers/{id}", { params: { path: { id: doomed.id } } }));
  await noContent("delete_site", api.DELETE("/v1/sites/{id}", { params: { path: { id: spare.id } } }));
  const problem404 = await problem(
    "get_mower of a deleted mower",
    api.GET("/v1/mowers/{id}", { params: { path: { id: doomed.id } } }),
    404,
  );
  const mowers = await ok("list_mowers", api.GET("/v1/mowers"));
  eq(
    mowers.items.map((m) => m.id),
    [mower.id],
    "list_mowers after the delete",
  );
  log(
    `Directory: site ${site.id} and mower ${mower.id} created, updated, read, listed; a spare site and mower ` +
      `deleted; problems ${problem404.status} (${problem404.type}) and ${problem422.status} (${problem422.type}).`,
  );
  return { site, mower: got };
}

/** A geofence, a zone and an assignment of the mower, before its states: each created, read, listed and changed. */
async function notificationSetup(api: Api, mowerId: string): Promise<Schemas["Zone"]> {
  const id = { path: { id: mowerId } };
  await problem("get_geofence before any", api.GET("/v1/mowers/{id}/geofence", { params: id }), 404);
  const fence: Schemas["Geofence"] = await ok(
    "put_geofence",
    api.PUT("/v1/mowers/{id}/geofence", { params: id, body: square(0, 200) }),
  );
  eq([fence.mower_id, fence.polygon], [mowerId, square(0, 200)], "put_geofence");
  eq(await ok("get_geofence", api.GET("/v1/mowers/{id}/geofence", { params: id })), fence, "get_geofence");
  await problem(
    "put_geofence of two points",
    api.PUT("/v1/mowers/{id}/geofence", {
      params: id,
      body: { type: "Polygon", coordinates: [[at(0, 0), at(1, 1)]] } satisfies Schemas["PolygonGeometry"],
    }),
    422,
  );

  const first: Schemas["Zone"] = await ok(
    "create_zone",
    api.POST("/v1/mowers/{id}/zones", {
      params: id,
      body: { name: "Lawn", polygon: square(60, 200) } satisfies Schemas["ZoneBody"],
    }),
    201,
  );
  const zone = await ok(
    "update_zone",
    api.PUT("/v1/mowers/{id}/zones/{zone_id}", {
      params: { path: { id: mowerId, zone_id: first.id } },
      body: { name: "Roses", polygon: square(60, 190) } satisfies Schemas["ZoneBody"],
    }),
  );
  eq([zone.id, zone.name, zone.polygon, zone.occupied], [first.id, "Roses", square(60, 190), false], "update_zone");
  const spare = await ok(
    "create_zone",
    api.POST("/v1/mowers/{id}/zones", {
      params: id,
      body: { name: "Spare", polygon: square(300, 400) } satisfies Schemas["ZoneBody"],
    }),
    201,
  );
  await noContent(
    "delete_zone",
    api.DELETE("/v1/mowers/{id}/zones/{zone_id}", { params: { path: { id: mowerId, zone_id: spare.id } } }),
  );
  const zones = await ok("list_zones", api.GET("/v1/mowers/{id}/zones", { params: id }));
  eq(
    zones.items.map((z) => [z.id, z.name]),
    [[zone.id, "Roses"]],
    "list_zones",
  );

  const assignment: Schemas["Assignment"] = await ok(
    "create_assignment",
    api.POST("/v1/mowers/{id}/assignments", {
      params: id,
      body: { operator: "Grace", priority: "normal" } satisfies Schemas["AssignmentBody"],
    }),
    201,
  );
  eq([assignment.operator, assignment.priority, assignment.active], ["Grace", "normal", true], "create_assignment");
  const changed = await ok(
    "update_assignment",
    api.PUT("/v1/mowers/{id}/assignments/{assignment_id}", {
      params: { path: { id: mowerId, assignment_id: assignment.id } },
      body: { operator: "Grace", priority: "high" } satisfies Schemas["AssignmentBody"],
    }),
  );
  eq([changed.id, changed.priority], [assignment.id, "high"], "update_assignment");
  const spareAssignment = await ok(
    "create_assignment",
    api.POST("/v1/mowers/{id}/assignments", {
      params: id,
      body: { operator: "Linus", priority: "low", active: false } satisfies Schemas["AssignmentBody"],
    }),
    201,
  );
  await noContent(
    "delete_assignment",
    api.DELETE("/v1/mowers/{id}/assignments/{assignment_id}", {
      params: { path: { id: mowerId, assignment_id: spareAssignment.id } },
    }),
  );
  const assignments = await ok("list_assignments", api.GET("/v1/mowers/{id}/assignments", { params: id }));
  eq(
    assignments.items.map((a) => [a.id, a.priority]),
    [[assignment.id, "high"]],
    "list_assignments",
  );
  log(
    `Notifications set up: geofence ${fence.version}, zone ${zone.id}, assignment ${assignment.id} (spares deleted).`,
  );
  return zone;
}

async function main(): Promise<void> {
  const demo = client(baseUrl!, demoToken!);
  await operations(demo);
  await demoFleet(demo);
  const { api, account } = await tenant(demo);
  const { site, mower } = await directory(api);
  const zone = await notificationSetup(api, mower.id);
  await telemetry({ api, account, site, mower, zone });
  await liveStream(baseUrl!, api, account, mower);
  await webhooks(api, mower);
  const id = { path: { id: mower.id } };
  await noContent("delete_geofence", api.DELETE("/v1/mowers/{id}/geofence", { params: id }));
  await problem("get_geofence after delete_geofence", api.GET("/v1/mowers/{id}/geofence", { params: id }), 404);
  log("Geofence deleted: get_geofence answers 404.");
  log("The TypeScript client exercised every operation family.");
}

main().catch((error: unknown) => {
  if (error instanceof CheckFailed) {
    console.error(`TypeScript client check failed: ${error.message}`);
  } else {
    console.error("TypeScript client check failed:", error);
  }
  process.exit(1);
});
