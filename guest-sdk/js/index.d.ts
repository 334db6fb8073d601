// Types of the beehive-guest SDK, for TypeScript plugins and editors.
// `Spec` and `Status` type parameters describe a plugin's own documents.

/** A JSON value, as specs, statuses and event details are. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** What a plugin reconciles and how it wants to be driven; unset values take the host's. */
export interface Registration {
  group: string;
  kind: string;
  finalizers?: string[];
  /** Passes at once (the host's default is 1). */
  concurrency?: number;
  /** The backstop scan for owed passes (must be positive). */
  owedPassIntervalMs?: number;
  /** A pass of every object on this cadence (zero turns it off). */
  fullPassIntervalMs?: number;
  /** A pass of each object this long after its last (zero turns it off). */
  individualPassIntervalMs?: number;
  /** A pass of every object each time the host starts. */
  startupFullPass?: boolean;
  /** The cap of the backoff ladder (must be positive). */
  maxRetryIntervalMs?: number;
  /** The CPU time one pass may use (the operator's ceiling still applies). */
  passDeadlineMs?: number;
  /** The schema version this release writes specs at (older ones go through `convertSpec`). */
  specVersion?: number;
  /** The schema version this release writes statuses at. */
  statusVersion?: number;
}

/** What happens after a pass. */
export declare class Action {
  readonly verdict: 'settled' | 'unsettled' | 'failed';
  readonly message: string;
  readonly requeueAfterMs: number | undefined;
  /** The stack of what a failed pass threw (`''` if nothing was thrown): the ReconcileFailed event's detail. */
  readonly trace: string;
  /** The pass observed the object's current generation. */
  static settled(): Action;
  /** Work done, not caught up: back after the owed-pass interval. */
  static unsettled(): Action;
  /** Failed: the backoff ladder, and a ReconcileFailed event with `message`. */
  static backoff(message: unknown): Action;
  /** This action, with the next pass `ms` milliseconds from now (ignored on a failure). */
  requeueAfter(ms: number): Action;
}

/** A per-type observation about an object; `status` null is unknown. */
export interface Condition {
  type: string;
  status: boolean | null;
  reason: string;
  message: string;
  /** Holds only inside the process that wrote it. */
  liveness: boolean;
  /** Set on read: a liveness condition from an earlier process. */
  unconfirmed?: boolean;
  transitionedAtMs?: number;
  updatedAtMs?: number;
}

/** Makes a condition. */
export declare function condition(
  type: string,
  status: boolean | null,
  options?: { reason?: string; message?: string; liveness?: boolean },
): Condition;

/** An observation for the object's timeline. */
export interface Event {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
  category: string;
  detail?: Json;
}

type EventOptions = { category?: string; detail?: Json };

/** Makes events. */
export declare const event: {
  normal(reason: string, message?: string, options?: EventOptions): Event;
  warning(reason: string, message?: string, options?: EventOptions): Event;
};

/** One way a spec breaks a rule. */
export interface Violation {
  /** Where, as a path into the spec (`spec.ports[0]`). */
  path: string;
  /** The rule, in words. */
  message: string;
}

/** Makes a violation. */
export declare function violation(path: string, message: string): Violation;

/** A pointer to a related object. */
export interface ObjectRef {
  id: number;
  group: string;
  kind: string;
}

/** Identity and metadata of an object. */
export declare class Meta {
  id: number;
  group: string;
  kind: string;
  name: string;
  generation: number;
  observedGeneration: number | null;
  /** When a pass last recorded what it observed, if one has. */
  observedAtMs: number | null;
  resourceVersion: number;
  deletionRequestedAtMs: number | null;
  finalizers: string[];
  conditions: Condition[];
  /** Its labels (`{ tier: 'web' }`). */
  labels: Record<string, string>;
  createdAtMs: number;
  updatedAtMs: number;
  /** Whether its deletion was requested. */
  readonly deleting: boolean;
  /** Its condition of `type`, if any. */
  condition(type: string): Condition | undefined;
}

/** An object as a pass sees it. */
export interface BeehiveObject<Spec = Json, Status = Json> {
  meta: Meta;
  spec: Spec;
  status: Status | null;
}

/**
 * An owner (deleting it cascades), finalizers and labels for a new object.
 * On an object that exists, a create-or-update replaces its labels with
 * `labels`; without them it leaves them as they are.
 */
export interface CreateOptions {
  owner?: number;
  finalizers?: string[];
  labels?: Record<string, string>;
}

/** Objects of one kind, read and written inside the current pass. */
export declare class KindClient<Spec = Json, Status = Json> {
  create(name: string, spec: Spec, options?: CreateOptions): BeehiveObject<Spec, Status>;
  getOrCreate(name: string, spec: Spec, options?: CreateOptions): { object: BeehiveObject<Spec, Status>; created: boolean };
  createOrUpdate(name: string, spec: Spec, options?: CreateOptions): { object: BeehiveObject<Spec, Status>; created: boolean };
  get(id: number): BeehiveObject<Spec, Status>;
  getByName(name: string): BeehiveObject<Spec, Status>;
  /** Every object, or those whose labels `selector` matches (kubectl's grammar). */
  list(selector?: string): BeehiveObject<Spec, Status>[];
  update(id: number, spec: Spec): BeehiveObject<Spec, Status>;
  updateByName(name: string, spec: Spec): BeehiveObject<Spec, Status>;
  delete(id: number): void;
  deleteByName(name: string): void;
  ownedBy(owner: number): BeehiveObject<Spec, Status>[];
}

/** What a pass writes about its object; closed once the pass returns. */
export declare class Client<Status = Json> {
  updateStatus(status: Status): void;
  setCondition(condition: Condition): void;
  setConditions(conditions: Condition[]): void;
  deleteCondition(type: string): void;
  addEvent(event: Event): void;
  addFinalizer(finalizer: string): void;
  deleteFinalizer(finalizer: string): void;
  addDependency(target: number): void;
  deleteDependency(target: number): void;
  hasIncomingEdges(): boolean;
  owner(): ObjectRef | undefined;
  dependencies(): ObjectRef[];
  dependents(): ObjectRef[];
  owned(): ObjectRef[];
  /** Runs `body` in a transaction frame: committed when it returns, rolled back when it throws. */
  transaction<T>(body: (client: this) => T): T;
  kind<S = Json, T = Json>(group: string, kind: string): KindClient<S, T>;
}

/** A controller: what it reconciles, its pass, and optionally its rules and upgrades. */
export interface Controller<Spec = Json, Status = Json> {
  registration: Registration;
  reconcile(
    client: Client<Status>,
    object: BeehiveObject<Spec, Status>,
  ): Action | void | Promise<Action | void>;
  /** What a pass that threw does next (default: backoff with the error). */
  errorPolicy?(object: BeehiveObject<Spec, Status>, error: unknown): Action;
  /** JSON Schema (draft 2020-12) of the spec. */
  specSchema?: Json;
  /** JSON Schema of the status. */
  statusSchema?: Json;
  /** Rules a schema cannot say; empty means valid. */
  validate?(spec: Spec): Violation[];
  convertSpec?(fromVersion: number, spec: Json): Json;
  convertStatus?(fromVersion: number, status: Json): Json;
}

/** The component's `controller` export. */
export declare function exportController<S, T>(controller: Controller<S, T>): object;
/** No longer needed (contract 0.2): `exportController` exports it all. */
export declare function exportSchema<S, T>(controller: Controller<S, T>): object;
/** No longer needed (contract 0.2): `exportController` exports it all. */
export declare function exportMigrator<S, T>(controller: Controller<S, T>): object;

/** Every code a BeehiveError may carry: the WIT `error` cases and `client-closed`. */
export declare const CODES: readonly string[];

/** An error a host call reported. */
export declare class BeehiveError extends Error {
  code: string;
  /** dependency-cycle: the cycle. */
  cycle?: string[];
  /** not-granted: the kind (`Kind.group`) and verb. */
  kind?: string;
  verb?: 'read' | 'write';
}

/** Named values from the operator's policy file (`[config]`). */
export declare const config: {
  get(key: string): string | undefined;
  keys(): string[];
};

/** Outgoing HTTP, to the hosts the policy grants. */
export declare const http: {
  fetch(input: string | URL | Request, init?: RequestInit): Promise<Response>;
};

/** Lines for the host's log. */
export declare const log: {
  trace(message: string): void;
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
};
