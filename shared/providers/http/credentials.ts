import { ProviderError } from "../model-client.ts";

/** What an HTTP provider reads from the environment to reach its API. */
export interface Credentials {
  apiKey: string;
  baseUrl: string;
}

/**
 * A provider's key and API root from the environment: the key is required (a missing or blank
 * one throws a `ProviderError` naming the secret to set); the root defaults to the API's own.
 */
export function credentialsOf(
  provider: string,
  keyName: string,
  env: { key: string | undefined; baseUrl: string | undefined },
  defaultBaseUrl: string,
): Credentials {
  const apiKey = env.key?.trim();
  if (!apiKey) {
    throw new ProviderError(
      `${provider}: ${keyName} is not set; configure it as a secret to use the ${provider} provider`,
    );
  }
  return { apiKey, baseUrl: env.baseUrl?.trim() || defaultBaseUrl };
}

/**
 * Where an API takes its key: `authorization` as a bearer token (OpenAI and most hosts), or
 * Azure OpenAI's `api-key` header.
 */
export type ApiKeyHeader = "authorization" | "api-key";

export const API_KEY_HEADERS: readonly ApiKeyHeader[] = ["authorization", "api-key"];

/** The headers of a streamed JSON request carrying `apiKey` in `header`. */
export function keyedStreamHeaders(
  apiKey: string,
  header: ApiKeyHeader = "authorization",
): Record<string, string> {
  return {
    ...(header === "api-key" ? { "api-key": apiKey } : { authorization: `Bearer ${apiKey}` }),
    "content-type": "application/json",
    accept: "text/event-stream",
  };
}
