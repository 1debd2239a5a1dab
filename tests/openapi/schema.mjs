// A JSON Schema 2020-12 validator (ajv) over the schemas of an OpenAPI document: every
// `#/components/schemas/X` reference resolves inside the document, and the seed's numeric
// formats (uint8, uint32, uint64, int64, double) are checked as ranges. Shared by the
// document checks (openapi.test.mjs) and the contract check of recorded traffic
// (contract.mjs). Validators are compiled once per schema object and cached.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const Ajv2020 = require('ajv/dist/2020.js').default;
const addFormats = require('ajv-formats').default;

const ROOT = 'urn:evald:openapi';

/** Rewrites `#/components/schemas/X` (and deeper pointers) to `<prefix>#/$defs/X`. */
function rewrite(node, prefix) {
  if (Array.isArray(node)) return node.map((n) => rewrite(n, prefix));
  if (node === null || typeof node !== 'object') return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    out[k] =
      k === '$ref' && typeof v === 'string'
        ? v.replace(/^#\/components\/schemas\//, `${prefix}#/$defs/`)
        : rewrite(v, prefix);
  }
  return out;
}

/**
 * A validator for the schemas of `api` (a parsed OpenAPI document):
 *   compile(schema) → ajv validate function (cached per schema object)
 *   errors(fn)      → the last errors of fn as one line
 */
export function makeValidator(api) {
  const ajv = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true });
  addFormats(ajv);
  const intRange = (lo, hi) => (n) => Number.isInteger(n) && n >= lo && n <= hi;
  ajv.addFormat('uint8', { type: 'number', validate: intRange(0, 255) });
  ajv.addFormat('uint32', { type: 'number', validate: intRange(0, 4294967295) });
  ajv.addFormat('uint64', { type: 'number', validate: intRange(0, 18446744073709551615) });
  ajv.addFormat('int64', {
    type: 'number',
    validate: intRange(-9223372036854775808, 9223372036854775807),
  });
  ajv.addFormat('double', { type: 'number', validate: Number.isFinite });
  // evald's extension keywords carry documentation, not validation.
  for (const keyword of ['x-evald-open']) ajv.addKeyword({ keyword, schemaType: 'string' });
  ajv.addSchema({ $id: ROOT, $defs: rewrite(api.components.schemas, '') });
  const cache = new Map();
  return {
    compile(schema) {
      if (typeof schema === 'object' && schema !== null && cache.has(schema)) return cache.get(schema);
      const fn = ajv.compile(typeof schema === 'boolean' ? schema : rewrite(schema, ROOT));
      if (typeof schema === 'object' && schema !== null) cache.set(schema, fn);
      return fn;
    },
    errors(fn) {
      return ajv.errorsText(fn.errors, { separator: '; ' });
    },
  };
}
