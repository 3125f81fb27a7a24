// Helpers of the TypeScript client check (check.ts): the typed client, and assertions that fail the
// run with a message naming the operation.

import createClient, { type Client } from "openapi-fetch";
import { isDeepStrictEqual } from "node:util";
import type { components, paths } from "./generated/schema.js";

export type Schemas = components["schemas"];
export type Api = Client<paths>;

// The generated types are named after the document's schemas: a Rust type's suffix (`Dto`) or a
// generator's made-up name (`Type0`) would be a type of this client (decision 112). tsc refuses
// this line while one exists (`Type 'true' is not assignable to type 'OddSchemaName'`).
type OddSchemaName = Extract<keyof Schemas, `${string}Dto` | `${string}Type0${string}`>;
export const schemaNamesAreNouns: [OddSchemaName] extends [never] ? true : OddSchemaName = true;

// openapi-fetch infers a call's options generically, so tsc does not refuse a parameter or a body
// field the document no longer has; the check writes `satisfies Query<path>` (`Header<path>`,
// `Schemas[body]`) after each literal, which it does refuse.
type Get<P extends keyof paths> = paths[P] extends { get: { parameters: infer Parameters } } ? Parameters : never;
/** The query parameters of `GET path`. */
export type Query<P extends keyof paths> = Get<P> extends { query?: infer Q } ? NonNullable<Q> : never;
/** The header parameters of `GET path`. */
export type Header<P extends keyof paths> = Get<P> extends { header?: infer H } ? NonNullable<H> : never;

/** A client of the generated `paths`, authenticated with `token`. */
export function client(baseUrl: string, token: string): Api {
  return createClient<paths>({
    baseUrl,
    headers: { Authorization: `Bearer ${token}` },
    // Every request, the live stream's included, gives up after 10 s.
    fetch: (request: Request) =>
      fetch(request, { signal: AbortSignal.any([request.signal, AbortSignal.timeout(10_000)]) }),
  });
}

/** `base` moved by `steps` of 1e-5 degrees (about a metre), as a decimal the server keeps exactly. */
export function degrees(base: number, steps: number): number {
  return Number((base + steps * 1e-5).toFixed(7));
}

export class CheckFailed extends Error {}

export function fail(message: string): never {
  throw new CheckFailed(message);
}

export function check(condition: boolean, message: string): asserts condition {
  if (!condition) fail(message);
}

export function eq<T>(actual: T, expected: T, what: string): void {
  if (!isDeepStrictEqual(actual, expected)) {
    fail(`${what}: ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
  }
}

/** The same instant, whatever the RFC 3339 spelling (`Z` or `+00:00`, digits of the fraction). */
export function sameInstant(actual: string | null | undefined, expected: string, what: string): void {
  check(
    actual != null && Date.parse(actual) === Date.parse(expected),
    `${what}: ${actual}, expected the instant ${expected}`,
  );
}

type Answer<D, E> = { data?: D; error?: E; response: Response };

/** A success answer of `status` with a body: the body, typed by the generated document. */
// The operations that also answer CSV (decision 193) have `string` in their data's type: asked
// without `Accept: text/csv` they answer JSON, and no JSON answer of the API is a bare string.
export async function ok<D, E>(
  what: string,
  call: Promise<Answer<D, E>>,
  status = 200,
): Promise<Exclude<D, string>> {
  const { data, error, response } = await call;
  if (response.status !== status || data === undefined) {
    fail(`${what} answered ${response.status} ${JSON.stringify(error ?? data)}, expected ${status}`);
  }
  if (typeof data === "string") {
    fail(`${what} answered text where JSON was expected`);
  }
  return data as Exclude<D, string>;
}

/** A `200` whose body was read as text (`parseAs: "text"`). */
export async function okText<D, E>(what: string, call: Promise<Answer<D, E>>): Promise<string> {
  const { data, error, response } = await call;
  if (response.status !== 200 || typeof data !== "string") {
    fail(`${what} answered ${response.status} ${JSON.stringify(error ?? data)}, expected 200 and text`);
  }
  return data;
}

/** A `204 No Content` answer. */
export async function noContent<D, E>(what: string, call: Promise<Answer<D, E>>): Promise<void> {
  const { error, response } = await call;
  if (response.status !== 204) {
    fail(`${what} answered ${response.status} ${JSON.stringify(error)}, expected 204`);
  }
}

/** A problem answer (RFC 9457) of `status`: its content type, `status` and `type` URI. */
export async function problem<D>(
  what: string,
  call: Promise<Answer<D, Schemas["Problem"]>>,
  status: number,
): Promise<Schemas["Problem"]> {
  const { error, response } = await call;
  if (response.status !== status || error === undefined) {
    fail(`${what} answered ${response.status}, expected the problem ${status}`);
  }
  eq(response.headers.get("content-type"), "application/problem+json", `${what}: content type`);
  eq(error.status, status, `${what}: the problem's status`);
  check(
    error.type.startsWith("https://swath.dev/problems/"),
    `${what}: the problem's type ${error.type} is not under https://swath.dev/problems/`,
  );
  check(error.detail.length > 0, `${what}: the problem has no detail`);
  return error;
}

/** Calls `read` until `done` holds of its answer, at most `seconds`; the last answer otherwise. */
export async function poll<T>(
  what: string,
  seconds: number,
  read: () => Promise<T>,
  done: (value: T) => boolean,
): Promise<T> {
  const deadline = performance.now() + seconds * 1000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (performance.now() > deadline) {
      fail(`${what}: still not so after ${seconds} s: ${JSON.stringify(value)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Every page of a paged list, following `next_cursor` while `truncated`. */
export async function allPages<P extends { truncated: boolean; next_cursor: string | null }>(
  what: string,
  page: (cursor: string | undefined) => Promise<P>,
): Promise<P[]> {
  const pages: P[] = [];
  let cursor: string | undefined;
  for (;;) {
    const current = await page(cursor);
    pages.push(current);
    if (!current.truncated) {
      eq(current.next_cursor, null, `${what}: the last page's next_cursor`);
      return pages;
    }
    check(current.next_cursor !== null, `${what}: a truncated page without next_cursor`);
    check(pages.length < 100, `${what}: more than 100 pages`);
    cursor = current.next_cursor;
  }
}

export function log(message: string): void {
  console.log(message);
}
