// Where the SDK's host calls go. Outside a component (under `node --test`)
// they go to an in-memory test host that `beehive-guest/fake` drives;
// inside one, `component.js` binds the host's imports at load time. One
// module holds the choice so every part of the SDK asks the same place.

/** The in-memory host a plugin's tests run against. */
export const testHost = {
  /** @type {Map<string, string>} */
  config: new Map(),
  /** @type {{level: string, message: string}[]} */
  logLines: [],
  /** @type {Map<string, Response | Error>} answers by `METHOD url` */
  httpStubs: new Map(),
  /** @type {Request[]} */
  httpSent: [],
  log(level, message) {
    this.logLines.push({ level, message });
  },
  configGet(key) {
    return this.config.get(key);
  },
  configKeys() {
    return [...this.config.keys()].sort();
  },
  async fetch(input, init) {
    const request = new Request(input, init);
    this.httpSent.push(request);
    const answer = this.httpStubs.get(`${request.method} ${request.url}`);
    if (answer === undefined) {
      // As a request the operator's policy does not grant.
      throw new TypeError(`fetch failed: ${request.method} ${request.url} is not granted`);
    }
    if (answer instanceof Error) throw answer;
    return answer.clone();
  },
};

/** The host the SDK speaks to: the component's once bound. */
export let host = testHost;

/** Whether the module runs inside a component. */
export let insideComponent = false;

/** Binds the component's host calls; `component.js` calls it once. */
export function bindComponent(componentHost) {
  host = componentHost;
  insideComponent = true;
}
