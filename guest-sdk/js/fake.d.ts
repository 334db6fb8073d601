// Types of beehive-guest/fake, the fake host a plugin's tests run against.
import type { Action, Condition, Controller, Event, Json } from './index.js';

export declare function setConfig(key: string, value: string): void;
export declare function stubHttp(method: string, url: string, answer: Response | Error): void;
export declare function sentRequests(): Request[];
export declare function logLines(): { level: string; message: string }[];
export declare function reset(): void;
export declare function grantMatches(pattern: string, kind: string): boolean;

export declare class FakeClient {
  constructor(options?: { storeGrants?: { read?: string[]; write?: string[] } | null });
  /** The last status written. */
  status: Json;
  conditions: Map<string, Condition>;
  events: Event[];
  addedFinalizers: string[];
  deletedFinalizers: string[];
  dependencies: Set<number>;
  denials: { kind: string; verb: 'read' | 'write' }[];
  commits: number;
  rollbacks: number;
  /** One pass of `controller` over an object with `spec`, `status` and `meta` fields. */
  run<S, T>(
    controller: Controller<S, T>,
    object?: { spec?: S; status?: T | null; meta?: Record<string, unknown> },
  ): Action | Promise<Action>;
}
