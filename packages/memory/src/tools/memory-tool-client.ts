/** The client the tools call: a `MemoryClient` (every path goes through it; no fetch of our own). */
import type { MemoryClient } from "../client/memory-client.ts";

export type MemoryToolClient = Pick<
  MemoryClient,
  {
    [Key in keyof MemoryClient]: MemoryClient[Key] extends (...args: never[]) => unknown ? Key : never;
  }[keyof MemoryClient]
>;
