// Drives the dashboard in headless Chromium (playwright-core, Debian's /usr/bin/chromium)
// for api/tests/it/dashboard.rs, against an API serving the chain it set up (the harness's
// market: jobs 1-5 and nodes 1-2, then job 3 running on node 3, node 4 with no GPU, node 1's
// long report of giving job 3 back), amounts in kUSD with 9 decimals:
//
//   node dashboard.mjs <base-url> <screenshot-dir> <submitter-address>
//
// 1. The jobs list shows jobs 5 to 1 (3 running on node 3 at 40%); job 3's page shows its
//    progress, charts, logs and timeline, node 1 barred and charged for giving it back,
//    and its attempts (node 1's give-back, the job's fault, with its reason; node 3
//    running), the long report wrapped within the window; every field of every event the
//    contracts' ABIs declare reads in words (amounts in the token, enums by name, no raw
//    hex number). Then it prints READY.
// 2. The test posts job 6 (no GPU, any price) on chain and publishes a progress report (70%) and a log line
//    for job 3; without a reload the list gains job 6 and job 3's bar moves to 70%, and
//    job 3's page (another tab) shows the new progress and log line. Then LIVE.
// 3. The other pages, both sides of the market: the nodes, each saying why it takes no
//    work (node 1 exiting, node 2 below the minimum stake); node 2's locked stake and its
//    slash with its job; job 4's open dispute (bond, exposure, deadline); job 5's refund
//    (the bounty; the slash went to the treasury), charge and attempt (the dispute lost,
//    the node's fault, its exposure slashed to the treasury; what the submitter got back and
//    what node 2 lost); the submitter's credits and their flows; the network's figures; job
//    1's payout; node 4 and job 6 say "no GPU", job 6 "any price". Every job's timeline is
//    in words and every job page as wide as the window at most. Then PAGES.
// Exits non-zero on a failed wait, a failed assertion or any error in the page.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
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

// What the contracts emit, from their sources: each event's fields (the market's ABI
// carries the verification and referee events too), the enums' sizes.
const repo = (path) => new URL(`../../../${path}`, import.meta.url);
const EVENTS = [...new Map(['JobMarket', 'NodeRegistry']
  .flatMap((name) => JSON.parse(readFileSync(repo(`contracts/protocol/artifacts/${name}.json`))).abi)
  .filter((entry) => entry.type === 'event')
  .map((event) => [event.name, event])).values()];
const ENUM_SIZES = Object.fromEntries(
  [...readFileSync(repo('contracts/src/types/Types.sol'), 'utf8').matchAll(/enum\s+(\w+)\s*\{([^}]*)\}/g)]
    .map(([, name, body]) => [name, body.replace(/\/\/.*$/gm, '').split(',').filter((m) => m.trim()).length]),
);
// A uint8 read as an enum (`IVerificationEvents.RefereesDecided`: 0 upheld … 3 not revealed).
const ENUM_LIKE = { 'RefereesDecided.outcome': 4 };
// Amounts: the uint96 and uint256 fields (but a draw's seat word), as `Event.field`.
const AMOUNTS = new Set(EVENTS.flatMap((event) => event.inputs
  .filter((input) => /^uint(96|256)$/.test(input.type) && input.name !== 'seats')
  .map((input) => `${event.name}.${input.name}`)));
assert.ok(AMOUNTS.has('ReplicaForfeited.forfeited') && ENUM_SIZES.FailureKind === 5, 'the ABIs and Types.sol read');

/** Every field of every event, formatted as the job page formats it, in words. */
async function everyEventFieldInWords(page) {
  const problems = await page.evaluate(async ({ events, enumSizes, enumLike }) => {
    const { eventField } = await import('/assets/views/job.js');
    const { html } = await import('/assets/format.js');
    const text = (value) => {
      const b = document.createElement('b');
      b.innerHTML = html`${value}`.text;
      return b.textContent;
    };
    const out = [];
    for (const event of events) {
      for (const input of event.inputs.filter((i) => i.type !== 'tuple')) {
        const where = `${event.name}.${input.name}`;
        const show = (value) => text(eventField(input.name, value, event.name));
        const size = enumSizes[(input.internalType ?? '').replace(/^enum\s+/, '')] ?? enumLike[where];
        if (size) {
          for (let i = 0; i < size; i += 1) {
            if (/^\d+$|unknown/.test(show(i))) out.push(`${where} ${i}: ${show(i)}`);
          }
        } else if (input.name === 'seats') {
          const seats = `0x${(4n | (7n << 96n)).toString(16)}`;
          if (show(seats) !== 'seat 0: node 4, seat 2: node 7') out.push(`${where}: ${show(seats)}`);
        } else if (/^uint(96|256)$/.test(input.type)) {
          // 10 kUSD as alloy sends a uint96: 0x hex.
          if (show('0x2540be400') !== '10.00 kUSD') out.push(`${where}: ${show('0x2540be400')}`);
        } else if (/^uint\d+$/.test(input.type) && show('0x2b').includes('0x')) {
          out.push(`${where}: ${show('0x2b')}`);
        }
      }
    }
    return out;
  }, { events: EVENTS, enumSizes: ENUM_SIZES, enumLike: ENUM_LIKE });
  assert.deepEqual(problems, [], 'event fields not in words');
}

/** The job page's timeline as shown: amounts in the token, no raw hex number, enums named. */
async function timelineInWords(page, id) {
  await page.waitForFunction((job) => document.title.startsWith(`Job ${job} `), id);
  await page.locator('[data-part="timeline"] .event').first().waitFor();
  const fields = await page.$$eval('[data-part="timeline"] .field', (els) => els.map((el) => ({
    event: el.closest('li').querySelector('.event').textContent,
    name: el.dataset.field,
    text: el.querySelector('b').innerText,
    hex: !!el.querySelector('b > code[title^="0x"]'),
  })));
  assert.ok(fields.length, `job ${id}'s timeline shows its events' fields`);
  for (const { event, name, text, hex } of fields) {
    const where = `job ${id}: ${event} ${name} ${JSON.stringify(text)}`;
    if (AMOUNTS.has(`${event}.${name}`)) assert.match(text, /^-?[\d,]+\.\d+ kUSD$/, where);
    // No number as raw hex, no enum as its number.
    assert.doesNotMatch(text, /^0x[0-9a-f]{0,16}$/i, where);
    if (name === 'kind' || name === 'outcome') assert.doesNotMatch(text, /^\d+$/, where);
    // Hex only for a hash or an address, shortened, whole in its title.
    if (text.startsWith('0x')) assert.ok(hex && text.includes('…'), where);
  }
}

/** The page is no wider than the window (1360 px), nor any card than itself: long text
 * wraps, nothing is cut off to scroll to. */
async function fitsTheWindow(page, what) {
  const [wide, window, cards] = await page.evaluate(() => [
    document.documentElement.scrollWidth, innerWidth,
    [...document.querySelectorAll('.card')].filter((card) => card.scrollWidth > card.clientWidth)
      .map((card) => `${card.querySelector('h2')?.textContent} ${card.scrollWidth}px in ${card.clientWidth}px`),
  ]);
  assert.ok(wide <= window, `${what} is ${wide}px wide in a ${window}px window`);
  assert.deepEqual(cards, [], `${what}: cards wider than themselves`);
}

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
  assert.match(overview, /1× NVIDIA-H100-80GB[\s\S]*≤ 0\.003 kUSD per GPU-hour/);
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
  // Node 1's report of it, some 2,000 characters with a 270-character word: wrapped.
  const report = detail.locator('[data-part="reports"]');
  assert.match(await report.innerText(), /node 1\s+the job's fault\s+4s[\s\S]*image not found: Error response/);
  await fitsTheWindow(detail, 'job 3 with a long worker report');
  await timelineInWords(detail, 3);
  await everyEventFieldInWords(detail);
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
  await fitsTheWindow(list, 'the nodes');
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
  // Node 4 has no GPU: it says so, not "0× GPU".
  await list.goto(`${base}/#/nodes/4`);
  assert.equal(await list.locator('[data-part="gpus"]').innerText(), 'no GPU');
  await list.screenshot({ path: `${shots}/cpu-node.png`, fullPage: true });
  await list.goto(`${base}/#/nodes`);
  assert.equal(await list.locator('tr[data-node-id="4"] [data-part="gpus"]').innerText(), 'no GPU');
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
  // What the submitter got back (the bounty, the bond) and what node 2 lost: its exposure.
  assert.match(
    await list.locator('[data-part="refund-sentence"]').innerText(),
    /^the whole bounty and the dispute bond \(0\.01 kUSD\): 0\.06 kUSD in all; the nodes' slashes \(0\.009 kUSD: node 2's dispute exposure, for losing the dispute\) went to the treasury 0x\S+, not to the submitter$/,
  );
  assert.match(await list.locator('[data-part="exposure"]').innerText(), /0\.009 kUSD of node 2's stake slashed, to the treasury/);
  const lost = await list.locator('[data-part="timeline"]').innerText();
  for (const field of [/exposure 0\.009 kUSD/, /bondToSubmitter 0\.01 kUSD/, /amount 0\.009 kUSD\s+nodeId node 2\s+stake 0\.091 kUSD/, /kind dispute lost\s+refund 0\.05 kUSD/]) {
    assert.match(lost, field);
  }
  await list.screenshot({ path: `${shots}/dispute-lost.png`, fullPage: true });
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
  // Job 6 asks for no GPU, at any price (2^96 − 1 base units, not a 29-digit number).
  await list.goto(`${base}/#/jobs/6`);
  await list.locator('[data-part="overview"] .chip').first().waitFor();
  assert.deepEqual(
    await list.locator('[data-part="overview"] .chip').allInnerTexts(),
    ['no GPU', '≥ 2 CPU cores', '≥ 4 GiB RAM', 'any price', 'runs ≤ 10m 00s'],
  );
  await list.screenshot({ path: `${shots}/cpu-job.png`, fullPage: true });
  // Every job: its timeline in words, its page no wider than the window.
  for (const id of [1, 2, 3, 4, 5, 6]) {
    await list.goto(`${base}/#/jobs/${id}`);
    await timelineInWords(list, id);
    await fitsTheWindow(list, `job ${id}`);
  }
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
