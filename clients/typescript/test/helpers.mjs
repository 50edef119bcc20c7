// What the pytest run (tests/clients/test_typescript_client.py) passes: the live server and keys.
import { EngramClient } from "../dist/index.js";

export const env = {
  url: process.env.ENGRAM_URL,
  key: process.env.ENGRAM_KEY,
  readOnlyKey: process.env.ENGRAM_READONLY_KEY,
  otherTenantKey: process.env.ENGRAM_OTHER_TENANT_KEY,
  schema: process.env.ENGRAM_SCHEMA,
};

if (!env.url || !env.key) {
  throw new Error("Run through pytest (tests/clients/test_typescript_client.py): ENGRAM_URL and ENGRAM_KEY are unset.");
}

export const client = (key = env.key, extra = {}) => new EngramClient({ baseUrl: env.url, apiKey: key, ...extra });
export const unique = (prefix) => `${prefix}-${Math.random().toString(16).slice(2, 10)}`;
