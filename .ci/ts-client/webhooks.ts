// The webhook operations through the typed client (issue 31): an endpoint created (its secret
// shown once), read, listed, changed, a test message enqueued and found in its deliveries, that
// delivery retried, the secret rotated (the previous one still signing for a while), and the
// endpoint deleted. The server runs with SWATH_WEBHOOK_DISPATCH=false (.ci/api-conformance), so
// nothing is sent from the CI machine, to `hooks.example.com` or any other host: the check is the
// API's, delivery is tests/webhooks/run.sh's.

import { type Api, type Query, type Schemas, check, eq, log, noContent, ok, problem } from "./support.js";

export async function webhooks(api: Api, mower: Schemas["MowerSummary"]): Promise<void> {
  const created: Schemas["WebhookWithSecret"] = await ok(
    "create_webhook",
    api.POST("/v1/webhooks", {
      body: {
        url: "https://hooks.example.com/swath",
        kinds: ["mowing_started", "error_raised", "alert_cleared"],
        mowers: [mower.id],
      } satisfies Schemas["NewWebhook"],
    }),
    201,
  );
  const hook = created.webhook;
  check(created.secret.startsWith("whsec_"), "create_webhook: the secret is not a whsec_ one");
  eq(
    [hook.url, [...hook.kinds].sort(), hook.mowers, hook.sites, hook.enabled, hook.disabled_reason],
    ["https://hooks.example.com/swath", ["alert_cleared", "error_raised", "mowing_started"], [mower.id], null, true, null],
    "create_webhook",
  );
  check(!JSON.stringify(hook).includes(created.secret), "create_webhook: the endpoint shows its secret");
  const id = { path: { id: hook.id } };
  eq(await ok("get_webhook", api.GET("/v1/webhooks/{id}", { params: id })), hook, "get_webhook");
  const page: Schemas["WebhookPage"] = await ok(
    "list_webhooks",
    api.GET("/v1/webhooks", { params: { query: { limit: 10 } satisfies Query<"/v1/webhooks"> } }),
  );
  eq([page.items.map((w) => w.id), page.truncated], [[hook.id], false], "list_webhooks");
  await problem(
    "create_webhook with a plain http URL",
    api.POST("/v1/webhooks", {
      body: { url: "http://hooks.example.com/swath", kinds: ["error_raised"] } satisfies Schemas["NewWebhook"],
    }),
    422,
  );

  const disabled: Schemas["Webhook"] = await ok(
    "update_webhook",
    api.PATCH("/v1/webhooks/{id}", {
      params: id,
      body: { enabled: false, kinds: ["error_raised"] } satisfies Schemas["WebhookPatch"],
    }),
  );
  eq([disabled.enabled, disabled.kinds, disabled.url], [false, ["error_raised"], hook.url], "update_webhook");

  const test: Schemas["Delivery"] = await ok("test_webhook", api.POST("/v1/webhooks/{id}/test", { params: id }), 202);
  eq([test.event_type, test.outcome, test.attempts], ["webhook_test", "pending", 0], "test_webhook");
  const deliveries: Schemas["DeliveryPage"] = await ok(
    "list_deliveries",
    api.GET("/v1/webhooks/{id}/deliveries", {
      params: { ...id, query: { limit: 10 } satisfies Query<"/v1/webhooks/{id}/deliveries"> },
    }),
  );
  // The simulated fleet keeps reporting: while the endpoint was enabled, its mower's events of
  // the chosen kinds may have been enqueued too. The test message is the one webhook_test.
  eq(
    deliveries.items.filter((d) => d.event_type === "webhook_test").map((d) => d.id),
    [test.id],
    "list_deliveries: the test message",
  );
  const retried: Schemas["Delivery"] = await ok(
    "retry_delivery",
    api.POST("/v1/webhooks/{id}/deliveries/{delivery_id}/retry", {
      params: { path: { id: hook.id, delivery_id: test.id } },
    }),
    202,
  );
  eq([retried.id, retried.outcome], [test.id, "pending"], "retry_delivery");

  const rotated: Schemas["WebhookWithSecret"] = await ok(
    "rotate_webhook_secret",
    api.POST("/v1/webhooks/{id}/rotate-secret", { params: id }),
  );
  check(
    rotated.secret.startsWith("whsec_") && rotated.secret !== created.secret,
    "rotate_webhook_secret: no new whsec_ secret",
  );
  check(
    rotated.webhook.previous_secret_expires_at !== null,
    "rotate_webhook_secret: the previous secret does not sign for a grace period",
  );

  await noContent("delete_webhook", api.DELETE("/v1/webhooks/{id}", { params: id }));
  await problem("get_webhook after delete_webhook", api.GET("/v1/webhooks/{id}", { params: id }), 404);
  log(
    `Webhooks: endpoint ${hook.id} created, read, listed, disabled, a test delivery listed and retried, ` +
      `its secret rotated, deleted (then 404).`,
  );
}
