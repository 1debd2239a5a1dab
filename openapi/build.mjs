// Builds the generated parts of the OpenAPI document from its hand-written source.
// openapi/openapi.yaml is the source of truth. This script (1) copies every JSON Schema of
// the seed contract (../shared/spec/seed/eval-api-reference.json, draft-07) into
// components.schemas of openapi.yaml, hoisting `definitions` and rewriting their `$ref`s,
// and (2) writes openapi/openapi.json, the same document as JSON, which evald embeds.
// The seed is optional: without it only step (2) runs, so users can rebuild without it.
// Usage: node openapi/build.mjs [--check]   (needs `npm ci --prefix tests/openapi`)
// --check writes nothing and exits 1 when either output is out of date.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

export const OPENAPI_DIR = dirname(fileURLToPath(import.meta.url));
export const REPO_DIR = resolve(OPENAPI_DIR, '..');
export const YAML_PATH = join(OPENAPI_DIR, 'openapi.yaml');
export const JSON_PATH = join(OPENAPI_DIR, 'openapi.json');

// The YAML library is a dependency of the test package; resolve it from there.
const require = createRequire(join(REPO_DIR, 'tests', 'openapi', 'package.json'));
const YAML = require('yaml');

const SEED_COMMENT =
  ' Generated from the seed contract (eval-api-reference.json) by openapi/build.mjs:\n' +
  ' do not edit by hand. Every schema from here to the end of components.schemas.';

/** Path of the shared folder (EVALD_SHARED_DIR, else <repo>/../shared), or null. */
export function sharedDir() {
  const dir = process.env.EVALD_SHARED_DIR || resolve(REPO_DIR, '..', 'shared');
  return existsSync(dir) ? dir : null;
}

/** The parsed seed reference, or null when ../shared is absent. */
export function loadSeed() {
  const dir = sharedDir();
  if (dir === null) return null;
  const file = join(dir, 'spec', 'seed', 'eval-api-reference.json');
  if (!existsSync(file)) return null;
  return JSON.parse(readFileSync(file, 'utf8'));
}

function rewriteRefs(node) {
  if (Array.isArray(node)) return node.map(rewriteRefs);
  if (node === null || typeof node !== 'object') return node;
  const out = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$ref' && typeof value === 'string') {
      const m = /^#\/definitions\/([^/]+)$/.exec(value);
      if (!m) throw new Error(`unexpected $ref ${value} in the seed`);
      out[key] = `#/components/schemas/${m[1]}`;
    } else {
      out[key] = rewriteRefs(value);
    }
  }
  return out;
}

function withoutTitle(schema) {
  const { title, ...rest } = schema;
  return rest;
}

/**
 * Every schema of the seed as components.schemas entries, sorted by name: each function's
 * request and response schema under its `title`, and every `definitions` entry under its
 * name, with `$schema` and `definitions` dropped and `$ref`s pointing at components.
 * Throws when two schemas of the same name differ (other than by `title`).
 */
export function hoistSeed(seed) {
  const schemas = new Map();
  const put = (name, schema) => {
    const prev = schemas.get(name);
    if (prev === undefined) {
      schemas.set(name, schema);
      return;
    }
    if (!isDeepStrictEqual(withoutTitle(prev), withoutTitle(schema)))
      throw new Error(`the seed defines two different schemas named ${name}`);
    if (schema.title !== undefined && prev.title === undefined) schemas.set(name, schema);
  };
  for (const fn of seed.functions) {
    for (const kind of ['request_schema', 'response_schema']) {
      const { $schema, definitions = {}, ...top } = fn[kind];
      if (typeof top.title !== 'string') throw new Error(`${fn.name} ${kind} has no title`);
      for (const [name, def] of Object.entries(definitions)) put(name, rewriteRefs(def));
      put(top.title, rewriteRefs(top));
    }
  }
  return new Map([...schemas.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Flow style for sequences of scalars (`type: [integer, "null"]`), block for the rest. */
function compactSequences(node) {
  YAML.visit(node, {
    Seq(_, seq) {
      if (seq.items.every((item) => YAML.isScalar(item)) && seq.items.length <= 8) seq.flow = true;
    },
  });
  return node;
}

/** Parses openapi.yaml into a YAML Document (keeps comments and layout). */
export function readDocument(text = readFileSync(YAML_PATH, 'utf8')) {
  const doc = YAML.parseDocument(text, { prettyErrors: true });
  if (doc.errors.length > 0) throw new Error(`openapi.yaml: ${doc.errors[0].message}`);
  return doc;
}

/**
 * Replaces the seed schemas in components.schemas of `doc` with `hoisted`: hand-written
 * schemas stay first in their order, the seed schemas follow sorted by name.
 */
export function mergeSeed(doc, hoisted) {
  const schemas = doc.getIn(['components', 'schemas']);
  if (!YAML.isMap(schemas)) throw new Error('openapi.yaml has no components.schemas map');
  schemas.items = schemas.items.filter((pair) => !hoisted.has(String(pair.key.value ?? pair.key)));
  let first = true;
  for (const [name, schema] of hoisted) {
    const key = doc.createNode(name);
    if (first) key.commentBefore = SEED_COMMENT;
    first = false;
    schemas.items.push(doc.createPair(key, compactSequences(doc.createNode(schema))));
  }
}

/** The JSON text of openapi.json for a YAML Document. */
export function renderJson(doc) {
  return `${JSON.stringify(doc.toJS({ maxAliasCount: -1 }), null, 2)}\n`;
}

/** Names of seed schemas whose copy in the document differs from the seed (or is missing). */
export function staleSeedSchemas(docJs, hoisted) {
  const have = docJs.components?.schemas ?? {};
  return [...hoisted.keys()].filter((name) => !isDeepStrictEqual(have[name], hoisted.get(name)));
}

function main(argv) {
  const check = argv.includes('--check');
  const text = readFileSync(YAML_PATH, 'utf8');
  const doc = readDocument(text);
  let yamlOut = text;
  let problems = 0;

  const seed = loadSeed();
  if (seed === null) {
    console.log('seed absent (../shared): the seed schemas in openapi.yaml are left as they are');
  } else {
    const hoisted = hoistSeed(seed);
    const stale = staleSeedSchemas(doc.toJS(), hoisted);
    if (stale.length > 0) {
      if (check) {
        console.error(`openapi.yaml: seed schemas out of date: ${stale.join(', ')}`);
        problems++;
      } else {
        mergeSeed(doc, hoisted);
        yamlOut = doc.toString({ lineWidth: 0, flowCollectionPadding: false });
      }
    }
  }

  const jsonOut = renderJson(readDocument(yamlOut));
  const jsonNow = existsSync(JSON_PATH) ? readFileSync(JSON_PATH, 'utf8') : '';
  if (jsonOut !== jsonNow && check) {
    console.error('openapi.json is out of date: run node openapi/build.mjs');
    problems++;
  }
  if (check) {
    if (problems === 0) console.log('openapi.yaml and openapi.json are up to date');
    return problems === 0 ? 0 : 1;
  }
  if (yamlOut !== text) {
    writeFileSync(YAML_PATH, yamlOut);
    console.log('wrote openapi/openapi.yaml (seed schemas)');
  }
  if (jsonOut !== jsonNow) {
    writeFileSync(JSON_PATH, jsonOut);
    console.log('wrote openapi/openapi.json');
  }
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (e) {
    console.error(`build.mjs: ${e.message}`);
    process.exitCode = 1;
  }
}
