// Every case of the shared job-spec corpus through the web app's validator
// (assets/validate.js), expecting the outcome the protocol's validator gives it:
// contracts/protocol/tests/spec_corpus.rs holds spec.rs to the same file. Run by
// `node --test` (api/tests/it/validate.rs).

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { validateRequirements, validateSpec } from '../../assets/validate.js';

const corpus = JSON.parse(
  readFileSync(new URL('../../../contracts/protocol/tests/spec_corpus.json', import.meta.url), 'utf8'),
);

/** The validator's answer in the corpus's terms (spec_corpus.rs `outcome`). */
function outcome(result) {
  if (result.ok) return 'ok';
  if (result.error === 'invalid') {
    assert.equal(result.message, `spec field ${result.field}: ${result.reason}`);
    return { field: result.field, reason: result.reason };
  }
  if (result.error === 'malformed') return { error: 'malformed' };
  return { error: result.error, message: result.message };
}

const requirements = JSON.parse(
  readFileSync(new URL('../../../contracts/protocol/tests/requirements_corpus.json', import.meta.url), 'utf8'),
);

test('the corpus is read', () => {
  assert.ok(corpus.length >= 60, `only ${corpus.length} cases`);
  assert.ok(requirements.length >= 20, `only ${requirements.length} requirements cases`);
});

// The market's posting rules (requirements_corpus.rs holds market.rs to the same file).
for (const { name, requirements: r, expect } of requirements) {
  test(`requirements: ${name}`, () => {
    assert.deepEqual(validateRequirements(r) ?? 'ok', expect);
  });
}

// A string is the spec's text as posted; any other value is posted as JSON.
for (const { name, spec, expect } of corpus) {
  test(name, () => {
    assert.deepEqual(outcome(validateSpec(spec)), expect);
  });
}
