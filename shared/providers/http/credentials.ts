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
