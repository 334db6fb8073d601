// The SDK a Beehive controller plugin is written against, in JavaScript or
// TypeScript. See README.md; the types are in index.d.ts.

export { Client, KindClient } from './client.js';
export { exportController, exportMigrator, exportSchema, runPass } from './controller.js';
export { BeehiveError, CODES } from './errors.js';
export { Action, Meta, condition, event, violation } from './model.js';
export * as config from './config.js';
export * as http from './http.js';
export * as log from './log.js';
