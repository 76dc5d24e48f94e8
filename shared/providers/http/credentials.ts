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

/** The headers of a streamed JSON request to an API that takes its key as a bearer token. */
export function bearerStreamHeaders(apiKey: string): Record<string, string> {
  return {
    authorization: `Bearer ${apiKey}`,
    "content-type": "application/json",
    accept: "text/event-stream",
  };
}
