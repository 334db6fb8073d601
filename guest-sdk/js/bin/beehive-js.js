#!/usr/bin/env node
// `beehive-js build app.js -o NAME.wasm`: a JavaScript or TypeScript plugin
// as a WebAssembly component, from any directory.
//
// rolldown bundles the module with this SDK (the module's imports of
// `beehive-guest` resolve to this very copy, so the component binding and
// the module share one SDK) and strips TypeScript; componentize-js then
// builds the component against the WIT this package carries (contract
// `beehive:controller@0.2.0`), for its world `plugin-with-http`: one
// `controller` export, and the wasi:http import `fetch` uses.

import { realpathSync } from 'node:fs';
import { mkdtemp, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const SDK = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const WIT = join(SDK, 'wit');

const USAGE = `usage: beehive-js build MODULE [-o NAME.wasm] [-w WORLD]

Builds MODULE (app.js or app.ts, exporting \`controller\`) into a Beehive
plugin component.`;

/** The world every module is built for. */
const WORLD = 'plugin-with-http';

/** The world a module is built for, once it exports a `controller`. */
export function worldFor(exports) {
  if (!exports.includes('controller')) {
    throw new Error(
      'the module exports no `controller`: end it with `export const controller = exportController(...)`',
    );
  }
  return WORLD;
}

/** The module and the SDK, as one ES module: its text and export names. */
async function bundle(module, staging) {
  const { rolldown } = await import('rolldown');
  const entry = join(staging, 'entry.js');
  // The component binding first, so the host's calls are bound before the
  // module's top level runs.
  await writeFile(
    entry,
    `import ${JSON.stringify(join(SDK, 'src/component.js'))};\n` +
      // Only the world's export: a module written for the first contract
      // may still export `schema` or `migrator`, which 0.2 has no place for.
      `export { controller } from ${JSON.stringify(module)};\n`,
  );
  const build = await rolldown({
    input: entry,
    platform: 'neutral',
    external: [/^beehive:/, /^wasi:/],
    resolve: { alias: { 'beehive-guest': join(SDK, 'src/index.js') } },
    logLevel: 'warn',
  });
  let output;
  try {
    ({ output } = await build.generate({ format: 'esm' }));
  } catch (error) {
    if (/controller/.test(error.message)) worldFor([]);
    throw error;
  }
  await build.close();
  const [chunk] = output;
  const file = join(staging, 'bundle.js');
  await writeFile(file, chunk.code);
  return { file, exports: chunk.exports };
}

/** A progress line, on stderr: stdout names what was built. */
function say(line) {
  console.error(`beehive-js: ${line}`);
}

async function build(moduleArg, outputArg, worldArg) {
  const module = resolve(moduleArg);
  if (!/\.(m?js|ts|mts)$/.test(module) || !(await stat(module).catch(() => null))?.isFile()) {
    throw new Error(`${moduleArg}: not a JavaScript or TypeScript module`);
  }
  const output = resolve(outputArg ?? `${basename(dirname(module))}.wasm`);
  const staging = await mkdtemp(join(tmpdir(), 'beehive-js-'));
  try {
    const started = performance.now();
    say(`bundling ${basename(module)} with the SDK (rolldown)...`);
    const bundled = await bundle(module, staging);
    const world = worldArg ?? worldFor(bundled.exports);
    // componentize-js says nothing for the seconds it takes.
    say(`componentizing for world ${world} with componentize-js...`);
    const { componentize } = await import('@bytecodealliance/componentize-js');
    const { component } = await componentize({
      sourcePath: bundled.file,
      witPath: WIT,
      worldName: world,
    });
    // Renamed into place: a host watching the directory never sees a
    // half-written file.
    const partial = join(dirname(output), `.${basename(output)}.tmp`);
    await writeFile(partial, component);
    await rename(partial, output);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    say(`built in ${seconds} s (${(component.length / 1e6).toFixed(1)} MB)`);
    console.log(`${output} (world ${world})`);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

async function main(argv) {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      output: { type: 'string', short: 'o' },
      world: { type: 'string', short: 'w' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help || positionals[0] !== 'build' || positionals.length !== 2) {
    console.error(USAGE);
    process.exit(values.help ? 0 : 2);
  }
  await build(positionals[1], values.output, values.world);
}

// Run as a command (through node_modules/.bin's link too), not imported.
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((error) => {
    console.error(`beehive-js: ${error.message}`);
    process.exit(1);
  });
}
