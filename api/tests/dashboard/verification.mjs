// Drives the dashboard in headless Chromium (playwright-core, Debian's /usr/bin/chromium)
// for api/tests/it/verification.rs: a replicated 3/2 job decided with one liar.
//
//   node verification.mjs <base-url> <screenshot-dir> <job-id> <liar-node-id>
//
// The job's page shows its verification card: the policy, two seats paid and the liar's
// slashed, each seat's digest marked against the one the quorum agreed on. Prints OK.
// Exits non-zero on a failed wait, a failed assertion or any error in the page.

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const SETUP = 'deploy/setup.sh installs it';
const require = createRequire(new URL('../../../.tools/npm/', import.meta.url));
let chromium;
try {
  ({ chromium } = require('playwright-core'));
} catch (error) {
  throw new Error(`playwright-core is missing from .tools/npm (${SETUP})`, { cause: error });
}

const [base, shots, job, liar] = process.argv.slice(2);
assert.ok(base && shots && job && liar, 'usage: node verification.mjs <base-url> <screenshot-dir> <job> <liar>');

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu'],
}).catch((error) => {
  throw new Error(`cannot start /usr/bin/chromium (Debian's chromium; ${SETUP})`, { cause: error });
});
const problems = [];
let page;
try {
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  context.setDefaultTimeout(30_000);
  page = await context.newPage();
  page.on('pageerror', (error) => problems.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  await page.goto(`${base}/#/jobs/${job}`);
  const card = page.locator('[data-part="verification"]');
  await card.locator('[data-part="seats"] tr[data-seat]').nth(2).waitFor();
  assert.match(await card.locator('[data-part="policy"]').innerText(), /replicated 3\/2/);
  assert.match(await page.locator('[data-part="overview"]').innerText(), /no GPU/);
  assert.match(await card.locator('[data-part="verified"]').innerText(), /2 seats agreed on 0x/);
  assert.equal(await card.locator('tr[data-seat-outcome="paid"]').count(), 2);
  const slashed = card.locator(`tr[data-seat-node="${liar}"][data-seat-outcome="slashed"]`);
  assert.match(await slashed.innerText(), /replica[\s\S]*✗[\s\S]*slashed/);
  for (const row of await card.locator('tr[data-seat-outcome="paid"]').all()) {
    assert.match(await row.innerText(), /✓[\s\S]*paid/);
  }
  const result = await page.locator('[data-part="result"]').innerText();
  assert.match(result, /verified: a quorum of replicas agreed/);
  assert.match(result, /the bounty of the 1 seat not paid[\s\S]*slashed seats' stakes[\s\S]*treasury/);
  await page.screenshot({ path: `${shots}/verification.png`, fullPage: true });
} catch (error) {
  if (page) await page.screenshot({ path: `${shots}/failed-verification.png`, fullPage: true }).catch(() => {});
  console.error(`page errors: ${JSON.stringify(problems)}`);
  throw error;
} finally {
  await browser.close();
}
assert.deepEqual(problems, [], 'errors in the page');
console.log('OK');
