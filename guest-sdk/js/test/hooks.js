// A module resolve hook: the component's `beehive:` imports resolve to
// wit-stub.js, so src/component.js loads under node.
const stub = new URL('./wit-stub.js', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if (specifier.startsWith('beehive:controller/')) {
    return { url: stub, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
