// Drives the dashboard in headless Chromium (playwright-core, Debian's /usr/bin/chromium)
// for api/tests/it/dashboard.rs, against an API serving the chain it set up (the harness's
// market: jobs 1-5 and nodes 1-2, then job 3 running on node 3), amounts in kUSD with 9
// decimals:
//
//   node dashboard.mjs <base-url> <screenshot-dir> <submitter-address>
//
// 1. The jobs list shows jobs 5 to 1 (3 running on node 3 at 40%); job 3's page shows its
//    progress, charts, logs and timeline, node 1 barred and charged for giving it back,
//    and its attempts (node 1's give-back, the job's fault, with its reason; node 3
//    running). Then it prints READY.
// 2. The test posts job 6 on chain and publishes a progress report (70%) and a log line
//    for job 3; without a reload the list gains job 6 and job 3's bar moves to 70%, and
//    job 3's page (another tab) shows the new progress and log line. Then LIVE.
// 3. The other pages, both sides of the market: the nodes, each saying why it takes no
//    work (node 1 exiting, node 2 below the minimum stake); node 2's locked stake and its
//    slash with its job; job 4's open dispute (bond, exposure, deadline); job 5's refund
//    (the bounty; the slash went to the treasury), charge and attempt (the dispute lost,
//    the node's fault, its exposure slashed to the treasury); the submitter's credits and their flows; the network's figures; job 1's
//    payout. Then PAGES.
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

const [base, shots, submitter] = process.argv.slice(2);
assert.ok(base && shots && submitter, 'usage: node dashboard.mjs <base-url> <screenshot-dir> <submitter>');
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
  assert.deepEqual(
    rows,
    [['5', 'failed'], ['4', 'disputed'], ['3', 'assigned'], ['2', 'cancelled'], ['1', 'completed']],
    'the jobs, newest first',
  );
  const job3 = list.locator('tr[data-job-id="3"]');
  await job3.locator('[role=progressbar][aria-valuenow="40"]').waitFor();
  assert.match(await job3.innerText(), /running[\s\S]*acme\/train[\s\S]*node 3[\s\S]*0\.05 kUSD[\s\S]*40%/);
  assert.match(await list.locator('tr[data-job-id="1"]').innerText(), /completed/);
  assert.match(await list.locator('tr[data-job-id="4"]').innerText(), /disputed[\s\S]*arbiter/);
  // Marks this document: a reload would lose it.
  await list.evaluate(() => { window.notReloaded = true; });

  await detail.goto(`${base}/#/jobs/3`);
  await detail.locator('[data-part="progress"] [role=progressbar][aria-valuenow="40"]').waitFor();
  await detail.locator('[data-part="progress-chart"] path.line').waitFor();
  await detail.locator('[data-part="loss-chart"] path.line').waitFor();
  await detail.locator('[data-part="gpu-chart"] path.line').waitFor();
  await detail.getByText('epoch 4/10 loss').waitFor();
  await detail.locator('[data-part="logs-state"]', { hasText: /^live$/ }).waitFor();
  // The reject's charge (a NodeSlashed) is in the timeline only when node 1 held the job
  // for a second or more.
  const timeline = (await detail.locator('[data-part="timeline"] .event').allInnerTexts())
    .filter((name) => name !== 'NodeSlashed');
  assert.deepEqual(timeline, ['JobPosted', 'JobAssigned', 'JobRejected', 'JobRequeued', 'JobAssigned']);
  const overview = await detail.locator('[data-part="overview"]').innerText();
  assert.match(overview, /1× NVIDIA-H100-80GB/);
  assert.match(overview, /Attempt ends\s*in /);
  assert.match(overview, /v1: fee 2\.5%/);
  const charges = detail.locator('[data-part="charges"]');
  assert.match(await charges.innerText(), /Barred: node 1/);
  assert.match(await charges.locator('tr[data-charge-node="1"]').innerText(), /gave the job back[\s\S]*kUSD/);
  // Its attempts: node 1 gave it back for the job's fault, with the worker's reason;
  // node 3 runs it.
  const attempts = detail.locator('[data-part="attempts"]');
  assert.match(
    await attempts.locator('tr[data-attempt="1"][data-outcome="rejected"][data-fault="job"]').innerText(),
    /node 1\s*claimed[\s\S]*gave the job back[\s\S]*the job's[\s\S]*image not found/,
  );
  assert.match(await attempts.locator('tr[data-attempt="2"][data-outcome="running"]').innerText(), /node 3[\s\S]*running/);
  console.log('READY');

  // 2. Changes made after READY, arriving over the live feeds.
  await list.locator('tr[data-job-id="6"][data-status="open"]').waitFor();
  await job3.locator('[role=progressbar][aria-valuenow="70"]').waitFor();
  assert.equal(await list.evaluate(() => window.notReloaded), true, 'the list was not reloaded');
  assert.deepEqual(
    await list.$$eval('tr[data-job-id]', (trs) => trs.map((tr) => tr.dataset.jobId)),
    ['6', '5', '4', '3', '2', '1'],
  );
  await list.screenshot({ path: `${shots}/jobs.png`, fullPage: true });

  await detail.locator('[data-part="progress"] [role=progressbar][aria-valuenow="70"]').waitFor();
  await detail.getByText('epoch 7/10 loss').waitFor();
  await detail.emulateMedia({ colorScheme: 'dark' });
  await detail.screenshot({ path: `${shots}/job.png`, fullPage: true });
  console.log('LIVE');

  // 3. The other pages. The providers: node 2 holds 10 of its 91 staked for job 4's
  // dispute, and lost 9 on job 5's.
  await list.goto(`${base}/#/nodes`);
  await list.locator('tr[data-node-id="3"][data-status="active"]').waitFor();
  assert.match(await list.locator('tr[data-node-id="1"]').innerText(), /exiting[\s\S]*8× NVIDIA-H100-80GB[\s\S]*0\.002 kUSD/);
  assert.match(await list.locator('tr[data-node-id="2"][data-status="inactive"]').innerText(), /0\.091 kUSD\s*0\.01 kUSD locked/);
  assert.match(await list.locator('tr[data-node-id="2"] [data-part="no-work"]').innerText(), /stake below the minimum/);
  assert.match(await list.locator('tr[data-node-id="1"] [data-part="no-work"]').innerText(), /^exiting/);
  await list.screenshot({ path: `${shots}/nodes.png`, fullPage: true });
  await list.goto(`${base}/#/nodes/2`);
  await list.locator('[data-part="locked"]', { hasText: /0\.01 kUSD\s*held for job 4/ }).waitFor();
  assert.match(await list.locator('[data-part="stake"]').innerText(), /0\.091 kUSD/);
  assert.match(await list.locator('[data-part="fees"]').innerText(), /0\.00 kUSD/);
  assert.match(await list.locator('[data-part="no-work"]').innerText(), /stake below the minimum: no new work until its operator tops it up/);
  assert.match(await list.locator('tr[data-slash-job="5"]').innerText(), /job 5\s*0\.009 kUSD\s*0\.091 kUSD/);
  await list.screenshot({ path: `${shots}/node.png`, fullPage: true });
  await list.goto(`${base}/#/nodes/1`);
  await list.locator('[data-part="earnings"]', { hasText: /0\.00 kUSD/ }).waitFor();

  // The submitter: job 4's open dispute, job 5's lost one, its credits.
  await list.goto(`${base}/#/jobs/4`);
  const dispute = list.locator('[data-part="dispute"]');
  await dispute.locator('[data-part="outcome"]', { hasText: 'open' }).waitFor();
  assert.match(await dispute.locator('[data-part="bond"]').innerText(), /0\.01 kUSD/);
  assert.match(await dispute.locator('[data-part="exposure"]').innerText(), /0\.01 kUSD of node 2/);
  assert.match(await dispute.innerText(), /Deadline\s*in /);
  assert.match(await list.locator('[data-part="overview"]').innerText(), /Arbiter decides by\s*in /);
  await list.screenshot({ path: `${shots}/dispute.png`, fullPage: true });
  await list.goto(`${base}/#/jobs/5`);
  await list.locator('[data-part="refund"]', { hasText: '0.05 kUSD' }).waitFor();
  assert.match(await list.locator('[data-part="result"]').innerText(), /dispute lost by the provider/);
  assert.match(await list.locator('[data-part="dispute"] [data-part="outcome"]').innerText(), /decided for the submitter/);
  assert.match(await list.locator('tr[data-charge-node="2"]').innerText(), /lost the dispute\s*0\.009 kUSD/);
  // Its one attempt: the node's fault, its exposure slashed to the treasury; the refund
  // is the bounty, not the slash.
  assert.match(
    await list.locator('[data-part="attempts"] tr[data-attempt="1"][data-outcome="disputeLost"][data-fault="node"]').innerText(),
    /node 2[\s\S]*lost the dispute[\s\S]*the node's[\s\S]*arbiter decided[\s\S]*0\.009 kUSD\s*treasury 0x/,
  );
  assert.match(
    await list.locator('[data-part="refund-sentence"]').innerText(),
    /^the whole bounty; the nodes' slashes \(0\.009 kUSD\) went to the treasury 0x\S+, not to the submitter$/,
  );
  // Credits: job 2's refund, a deposit of 5, jobs 4 and 5 escrowed 55 of them, job 5's
  // bounty and bond back, job 6 took 20: 40.
  await list.goto(`${base}/#/accounts/${submitter}`);
  await list.locator('[data-part="balance"]', { hasText: '0.04 kUSD' }).waitFor();
  assert.match(await list.locator('[data-part="deposited"]').innerText(), /0\.005 kUSD/);
  assert.match(await list.locator('[data-part="refunded"]').innerText(), /0\.10 kUSD/);
  assert.match(await list.locator('[data-part="bonds"]').innerText(), /0\.02 kUSD posted\s*0\.01 kUSD returned/);
  assert.equal(await list.locator('tr[data-job-id]').count(), 6);
  await list.screenshot({ path: `${shots}/account.png`, fullPage: true });

  await list.goto(`${base}/#/network`);
  await list.locator('.tile', { hasText: 'Jobs' }).first().waitFor();
  await list.locator('[data-part="jobs-chart"] svg rect.barfill').first().waitFor();
  const tiles = await list.locator('[data-part="tiles"]').innerText();
  assert.match(tiles, /Active GPUs\s*8/);
  assert.match(tiles, /0\.01 kUSD locked in disputes/);
  assert.match(tiles, /Policy\s*v1\s*taking jobs/);
  await list.screenshot({ path: `${shots}/network.png`, fullPage: true });
  await list.goto(`${base}/#/jobs/1`);
  await list.locator('[data-part="result"]', { hasText: 'Paid to provider' }).waitFor();
  assert.match(await list.locator('[data-part="result"]').innerText(), /accepted by the submitter/);
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
