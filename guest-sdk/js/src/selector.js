// Label selectors in kubectl's grammar, as the host reads them, for the
// fake host: requirements joined by commas, each `key`, `!key`,
// `key=value` (or `==`), `key!=value`, `key in (a,b)` or
// `key notin (a,b)`; every one must hold.

import { BeehiveError } from './errors.js';

/** The requirements `text` names: predicates over a labels object. */
export function parseSelector(text) {
  const requirements = [];
  for (const [start, part] of parts(text)) {
    requirements.push(requirement(text, start, part));
  }
  return requirements;
}

/** Whether `labels` meets every requirement. */
export function selectorMatches(requirements, labels) {
  return requirements.every((holds) => holds(labels ?? {}));
}

/** Each comma-separated requirement and where it starts; commas inside
 * parentheses belong to a set. */
function* parts(text) {
  let depth = 0;
  let start = 0;
  const padded = `${text},`;
  for (let at = 0; at < padded.length; at++) {
    const char = padded[at];
    if (char === '(') depth++;
    else if (char === ')') depth--;
    else if (char === ',' && depth === 0) {
      const part = padded.slice(start, at);
      if (part.trim() || text.trim()) yield [start, part];
      start = at + 1;
    }
  }
}

function requirement(text, start, part) {
  const refused = (what) =>
    new BeehiveError('invalid-option', `the selector ${JSON.stringify(text)}: at position ${start}: ${what}`);
  const words = part.trim();
  if (!words) throw refused('expected a requirement');
  const has = (labels, key) => Object.hasOwn(labels, key);
  for (const operator of ['notin', 'in']) {
    const found = words.match(new RegExp(`^(\\S+)\\s+${operator}\\s+(.*)$`));
    if (!found) continue;
    const [, key, set] = found;
    if (!(set.startsWith('(') && set.endsWith(')'))) {
      throw refused(`expected a set in parentheses after ${operator}`);
    }
    checkKey(key, refused);
    const members = new Set(set.slice(1, -1).split(',').map((v) => v.trim()));
    return operator === 'in'
      ? (labels) => has(labels, key) && members.has(labels[key])
      : (labels) => !has(labels, key) || !members.has(labels[key]);
  }
  for (const operator of ['!=', '==', '=']) {
    const at = words.indexOf(operator);
    if (at === -1) continue;
    const key = words.slice(0, at).trim();
    const value = words.slice(at + operator.length).trim();
    checkKey(key, refused);
    return operator === '!='
      ? (labels) => !has(labels, key) || labels[key] !== value
      : (labels) => has(labels, key) && labels[key] === value;
  }
  if (words.startsWith('!')) {
    const key = words.slice(1).trim();
    checkKey(key, refused);
    return (labels) => !has(labels, key);
  }
  checkKey(words, refused);
  return (labels) => has(labels, words);
}

function checkKey(key, refused) {
  if (!key || /[\s(),!=]/.test(key)) throw refused(`${JSON.stringify(key)} is not a label key`);
}
