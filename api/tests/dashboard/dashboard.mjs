// Drives the dashboard in headless Chromium (playwright-core, Debian's /usr/bin/chromium)
// for api/tests/it/dashboard.rs, against an API serving the chain it set up:
//
//   node dashboard.mjs <base-url> <screenshot-dir>
//
// 1. The jobs list shows jobs 3, 2, 1 (3 running on node 2 at 40%); job 3's page shows its
//    progress, charts, logs and timeline. Then it prints READY.
// 2. The test posts job 4 on chain and publishes a progress report (70%) and a log line
//    for job 3; without a reload the list gains job 4 and job 3's bar moves to 70%, and
//    job 3's page (another tab) shows the new progress and log line.
// 3. The nodes and network pages and job 1's result render.
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

const [base, shots] = process.argv.slice(2);
assert.ok(base && shots, 'usage: node dashboard.mjs <base-url> <screenshot-dir>');
const TIMEOUT = 30_000;

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu'],
}).catch((error) => {
  throw new Error(`cannot start /usr/bin/chromium (Debian's chromium; ${SETUP})`, { cause: error });
});
const problems = [];
let pages = [];
try {
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  context.setDefaultTimeout(TIMEOUT);
  const watch = (page, name) => {
    page.on('pageerror', (error) => problems.push(`${name}: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`${name} console: ${message.text()}`);
    });
  };
  const list = await context.newPage();
  watch(list, 'jobs list');
  const detail = await context.newPage();
  watch(detail, 'job 3');
  pages = [list, detail];

  // 1. What the chain and the workers said so far.
  await list.goto(`${base}/#/jobs`);
  await list.waitForSelector('#live[data-state="live"]');
  await list.waitForSelector('tr[data-job-id="1"]');
  const rows = await list.$$eval('tr[data-job-id]', (trs) => trs.map((tr) => [tr.dataset.jobId, tr.dataset.status]));
  assert.deepEqual(rows, [['3', 'assigned'], ['2', 'cancelled'], ['1', 'completed']], 'the jobs, newest first');
  const job3 = list.locator('tr[data-job-id="3"]');
  await job3.locator('[role=progressbar][aria-valuenow="40"]').waitFor();
  assert.match(await job3.innerText(), /running[\s\S]*acme\/train[\s\S]*node 2[\s\S]*0\.05 kUSD[\s\S]*40%/);
  assert.match(await list.locator('tr[data-job-id="1"]').innerText(), /completed/);
  // Marks this document: a reload would lose it.
  await list.evaluate(() => { window.notReloaded = true; });

  await detail.goto(`${base}/#/jobs/3`);
  await detail.locator('[data-part="progress"] [role=progressbar][aria-valuenow="40"]').waitFor();
  await detail.locator('[data-part="progress-chart"] path.line').waitFor();
  await detail.locator('[data-part="loss-chart"] path.line').waitFor();
  await detail.locator('[data-part="gpu-chart"] path.line').waitFor();
  await detail.getByText('epoch 4/10 loss').waitFor();
  await detail.locator('[data-part="logs-state"]', { hasText: /^live$/ }).waitFor();
  const timeline = await detail.locator('[data-part="timeline"] .event').allInnerTexts();
  assert.deepEqual(timeline, ['JobPosted', 'JobAssigned', 'JobRejected', 'JobRequeued', 'JobAssigned']);
  assert.match(await detail.locator('[data-part="overview"]').innerText(), /1× NVIDIA-H100-80GB/);
  console.log('READY');

  // 2. Changes made after READY, arriving over the live feeds.
  await list.locator('tr[data-job-id="4"][data-status="open"]').waitFor();
  await job3.locator('[role=progressbar][aria-valuenow="70"]').waitFor();
  assert.equal(await list.evaluate(() => window.notReloaded), true, 'the list was not reloaded');
  assert.deepEqual(
    await list.$$eval('tr[data-job-id]', (trs) => trs.map((tr) => tr.dataset.jobId)),
    ['4', '3', '2', '1'],
  );
  await list.screenshot({ path: `${shots}/jobs.png`, fullPage: true });

  await detail.locator('[data-part="progress"] [role=progressbar][aria-valuenow="70"]').waitFor();
  await detail.getByText('epoch 7/10 loss').waitFor();
  await detail.emulateMedia({ colorScheme: 'dark' });
  await detail.screenshot({ path: `${shots}/job.png`, fullPage: true });
  console.log('LIVE');

  // 3. The other pages.
  await list.goto(`${base}/#/nodes`);
  await list.locator('tr[data-node-id="2"][data-status="active"]').waitFor();
  assert.match(await list.locator('tr[data-node-id="1"]').innerText(), /exiting[\s\S]*8× NVIDIA-H100-80GB[\s\S]*0\.002 kUSD/);
  await list.screenshot({ path: `${shots}/nodes.png`, fullPage: true });
  await list.goto(`${base}/#/network`);
  await list.locator('.tile', { hasText: 'Jobs' }).first().waitFor();
  await list.locator('[data-part="jobs-chart"] svg rect.barfill').first().waitFor();
  assert.match(await list.locator('[data-part="tiles"]').innerText(), /Active GPUs\s*8/);
  await list.screenshot({ path: `${shots}/network.png`, fullPage: true });
  await list.goto(`${base}/#/jobs/1`);
  await list.locator('[data-part="result"]', { hasText: 'Paid to provider' }).waitFor();
  await list.locator('[data-part="logs-state"]', { hasText: 'job finished' }).waitFor();
  console.log('PAGES');
} catch (error) {
  // What the pages showed, for the failure's diagnosis.
  await Promise.allSettled(pages.map((page, i) => page.screenshot({ path: `${shots}/failed-${i}.png`, fullPage: true })));
  console.error(`screenshots of the failure: ${shots}/failed-*.png; page errors: ${JSON.stringify(problems)}`);
  throw error;
} finally {
  await browser.close();
}
assert.deepEqual(problems, [], 'errors in the page');
console.log('OK');
