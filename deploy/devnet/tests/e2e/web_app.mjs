// Drives the web app in headless Chromium (playwright-core, Debian's /usr/bin/chromium) for
// web_app.rs, against the dev network's real services. The wallet is an injected EIP-1193
// provider that announces itself by EIP-6963 and forwards every JSON-RPC call to the dev
// network's anvil (whose accounts are unlocked, so anvil signs), through a binding: the
// page's CSP lets it reach nothing but the API.
//
//   node web_app.mjs <config.json>
//
// config: {base, rpc, shots, submitter, operator, wasm: {moduleUri, moduleSha256,
//   inputUri, inputSha256}}
//
// Prints, as it goes: CONNECTED; REFUSED (a bad image refused before anything was sent);
// POSTED <job> (the WASM demo from the form); COMPLETED <job>; VERIFIED <job> (its result
// downloaded through the API and its SHA-256 equal to the chain's); CANCELLED <job> (a job
// no node can run, cancelled from its page); REGISTERED <node> (by the operator, from the
// form, with an agent key made in the page); PLACED <job> <node> (a job only that node can
// run, assigned to it by the matcher); OK. Exits non-zero on a failed wait, a failed
// assertion or any error in the page.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../../../.tools/npm/', import.meta.url));
let chromium;
try {
  ({ chromium } = require('playwright-core'));
} catch (error) {
  throw new Error('playwright-core is missing from .tools/npm (deploy/setup.sh installs it)', { cause: error });
}

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { base, rpc, shots, submitter, operator, wasm } = config;
const TIMEOUT = 60_000;
/** Markup where a node's metadata URI goes. */
const HOSTILE = '"><img src=x onerror="window.__xss=1">';
/** What a job needs to run to its payout on a loaded two-core machine. */
const JOB_TIMEOUT = 240_000;

// Every JSON-RPC method the page's wallet was asked, in order.
const calls = [];
let rpcId = 0;
async function forward(method, params) {
  calls.push(method);
  const response = await fetch(rpc, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, params }),
  });
  return response.json();
}

// The injected wallet: EIP-1193 over the binding, announced by EIP-6963; the test switches
// its account with `__gantrySwitch`. `chain` (hex) makes it a wallet on another chain.
function wallet({ account, chain }) {
  const listeners = {};
  window.__gantryAccount = account;
  const provider = {
    async request({ method, params }) {
      if (method === 'eth_requestAccounts' || method === 'eth_accounts') return [window.__gantryAccount];
      if (method === 'eth_chainId' && chain) return chain;
      if (method === 'wallet_switchEthereumChain') return null;
      const answer = await window.__rpc(method, params ?? []);
      if (answer.error) {
        const error = new Error(answer.error.message);
        error.code = answer.error.code;
        error.data = answer.error.data;
        throw error;
      }
      return answer.result;
    },
    on(event, fn) { (listeners[event] ??= []).push(fn); },
    removeListener(event, fn) { listeners[event] = (listeners[event] ?? []).filter((f) => f !== fn); },
  };
  window.__gantrySwitch = (next) => {
    window.__gantryAccount = next;
    for (const fn of listeners.accountsChanged ?? []) fn([next]);
  };
  const info = { uuid: '6f1b5a2e-7c39-4d2a-9a51-0b8f3c2d1e4f', name: 'Test wallet', rdns: 'org.gantry.test',
    icon: 'data:image/svg+xml,%3Csvg xmlns="http://www.w3.org/2000/svg"/%3E' };
  const announce = () => window.dispatchEvent(new CustomEvent('eip6963:announceProvider', {
    detail: Object.freeze({ info, provider }),
  }));
  window.addEventListener('eip6963:requestProvider', announce);
  announce();
}

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu'],
});
const problems = [];
let page;
let shot = 0;
try {
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  context.setDefaultTimeout(TIMEOUT);
  await context.exposeBinding('__rpc', (_, method, params) => forward(method, params));
  await context.addInitScript(wallet, { account: submitter });
  page = await context.newPage();
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  const snap = (name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });

  // Connect: the account, its balance and credits, the network.
  await page.goto(`${base}/#/submit`);
  await page.locator('#wallet [data-connect]').click();
  await page.locator('#wallet [data-wallet="ready"]').waitFor();
  assert.equal(await page.locator('#wallet [data-wallet="ready"]').getAttribute('data-account'), submitter);
  await page.locator('#wallet [data-part="balance"]').waitFor();
  assert.match(await page.locator('#wallet [data-part="balance"]').innerText(), /^[\d,]+\.\d+ gUSD$/);
  console.log('CONNECTED');

  // No wallet in the browser, or one on another chain: the header says so.
  const bare = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  const nowallet = await bare.newPage();
  await nowallet.goto(`${base}/#/submit`);
  await nowallet.locator('#wallet [data-wallet="absent"]').waitFor();
  assert.equal(await nowallet.locator('#wallet').innerText(), 'No wallet found');
  await bare.close();
  const elsewhere = await browser.newContext({ viewport: { width: 1360, height: 900 } });
  await elsewhere.exposeBinding('__rpc', (_, method, params) => forward(method, params));
  await elsewhere.addInitScript(wallet, { account: submitter, chain: '0x1' });
  const mainnet = await elsewhere.newPage();
  await mainnet.goto(`${base}/#/submit`);
  await mainnet.locator('#wallet [data-connect]').click();
  await mainnet.locator('#wallet [data-wallet="wrong-chain"]').waitFor();
  assert.match(await mainnet.locator('#wallet').innerText(), /is on chain 1; Gantry is on 31337\s+Switch network/);
  await mainnet.screenshot({ path: `${shots}/wrong-chain.png` });
  await elsewhere.close();
  console.log('WALLET-STATES');

  // A bad image reference is refused by the protocol's rules before anything is signed or sent.
  await page.locator('#submit-form [data-part="wait"] [data-wait]').waitFor();
  await page.selectOption('select[name="engine"]', 'docker');
  await page.fill('input[name="image"]', 'Not A Valid Image!');
  await page.fill('textarea[name="command"]', 'true');
  const before = calls.length;
  await page.locator('[data-action="post"]').click();
  await page.locator('[data-part="errors"] [data-error]').first().waitFor();
  const refusals = await page.locator('[data-part="errors"]').innerText();
  assert.match(refusals, /spec field image/, refusals);
  const sent = calls.slice(before).filter((m) => /^eth_(send|sign)/.test(m));
  assert.deepEqual(sent, [], 'nothing signed or sent for a refused form');
  await snap('submit-refused');
  console.log('REFUSED');

  // The WASM demo from the form: a permit and one transaction, then its page follows it.
  await page.reload();
  // The wallet connected before is connected again without asking.
  await page.locator('#wallet [data-wallet="ready"]').waitFor();
  await page.locator('#submit-form [data-part="wait"] [data-wait]').waitFor();
  await fillWasmDemo(page);
  assert.match(await page.locator('[data-part="wait"]').innerText(), /can run it now/);
  await snap('submit');
  const posting = calls.length;
  await page.locator('[data-action="post"]').click();
  const job = await jobPage(page);
  const posted = calls.slice(posting);
  assert.ok(posted.includes('eth_signTypedData_v4'), `the permit was signed: ${posted}`);
  assert.equal(posted.filter((m) => m === 'eth_sendTransaction').length, 1, `one transaction: ${posted}`);
  console.log(`POSTED ${job}`);
  // Its result in, the submitter accepts it within the challenge window: the node is paid.
  await page.locator('[data-part="status"] .badge.s-submitted').waitFor({ timeout: JOB_TIMEOUT });
  await page.locator('[data-job-action="accept"]').click();
  await page.locator('[data-part="status"] .badge.s-completed').waitFor({ timeout: JOB_TIMEOUT });
  await page.locator('[data-part="result"]').getByText('Paid to provider').waitFor();
  console.log(`COMPLETED ${job}`);
  await page.locator('[data-job-action="download"]').click();
  await page.locator('[data-result-check="ok"]').waitFor();
  assert.ok(await page.locator('[data-part="result-file"]').count(), 'the checked result can be saved');
  await snap('job-completed');
  console.log(`VERIFIED ${job}`);

  // Another run of the demo, its result disputed from the page (the bond approved first).
  await page.goto(`${base}/#/submit`);
  await page.locator('#submit-form [data-part="wait"] [data-wait]').waitFor();
  await fillWasmDemo(page);
  await page.locator('[data-action="post"]').click();
  const disputed = await jobPage(page);
  await page.locator('[data-part="status"] .badge.s-submitted').waitFor({ timeout: JOB_TIMEOUT });
  await page.locator('[data-job-action="dispute"]').click();
  await page.locator('[data-part="status"] .badge.s-disputed').waitFor({ timeout: JOB_TIMEOUT });
  await snap('job-disputed');
  console.log(`DISPUTED ${disputed}`);

  // A job no node can run (a GPU, and the dev network has none) waits; its submitter
  // cancels it from its page and the bounty comes back.
  await page.goto(`${base}/#/submit`);
  await page.locator('#submit-form [data-part="wait"] [data-wait]').waitFor();
  await fillWasmDemo(page);
  await page.selectOption('select[name="engine"]', 'docker');
  await page.fill('input[name="image"]', 'busybox:1.36');
  await page.selectOption('select[name="gpu"]', 'any');
  await page.fill('input[name="gpus"]', '1');
  await page.locator('[data-part="wait"] [data-wait="none"]').waitFor();
  assert.match(await page.locator('[data-part="wait"]').innerText(), /It would wait.*GPU count/s);
  await page.locator('[data-action="post"]').click();
  const open = await jobPage(page);
  await page.locator('[data-job-action="cancel"]').click();
  await page.locator('[data-part="status"] .badge.s-cancelled').waitFor({ timeout: JOB_TIMEOUT });
  await snap('job-cancelled');
  console.log(`CANCELLED ${open}`);

  // A second node, registered from the form by another account with an agent key made in
  // the page; the worker's config is printed for it.
  await page.evaluate((account) => window.__gantrySwitch(account), operator);
  await page.goto(`${base}/#/operate`);
  await page.locator(`#wallet [data-account="${operator}"]`).waitFor();
  await page.fill('input[name="gpuModel"]', 'WEBAPP TEST GPU');
  await page.fill('input[name="gpuCount"]', '1');
  await page.fill('input[name="vramMiB"]', '1024');
  await page.fill('input[name="cpuCores"]', '2');
  await page.fill('input[name="ramMiB"]', '2048');
  await page.fill('input[name="price"]', '1.5');
  // Markup in what a node declares is shown as text wherever it appears.
  await page.fill('input[name="metadataURI"]', HOSTILE);
  await page.locator('[data-action="register"]').click();
  await page.locator('[data-part="worker-config"]').waitFor({ timeout: JOB_TIMEOUT });
  const toml = await page.locator('[data-part="toml"]').innerText();
  const node = Number(/node_id = (\d+)/.exec(toml)?.[1]);
  assert.ok(node > 1, toml);
  assert.match(await page.locator('[data-part="agent-key"]').innerText(), /^0x[0-9a-f]{64}$/);
  await page.locator(`[data-part="mine"] [data-node-id="${node}"]`).waitFor({ timeout: JOB_TIMEOUT });
  await snap('operate');
  console.log(`REGISTERED ${node}`);

  // The submitter posts a job only that node can run; the matcher places it there.
  await page.evaluate((account) => window.__gantrySwitch(account), submitter);
  const model = 'WEBAPP-TEST-GPU';
  await page.goto(`${base}/#/submit`);
  await page.locator(`select[name="gpu"] option[value="${model}"]`).waitFor({ state: 'attached' });
  await page.selectOption('select[name="engine"]', 'docker');
  await page.fill('input[name="image"]', 'busybox:1.36');
  await page.fill('textarea[name="command"]', 'true');
  await page.selectOption('select[name="gpu"]', model);
  await page.fill('input[name="gpus"]', '1');
  await page.fill('input[name="vram"]', '1');
  await page.fill('input[name="ram"]', '1');
  await page.fill('input[name="timeout"]', '300');
  await page.locator('[data-part="wait"] [data-wait="fits"]').waitFor();
  await page.locator('[data-action="post"]').click();
  const placed = await jobPage(page);
  await page.locator(`[data-part="overview"] a[href="#/nodes/${node}"]`).waitFor({ timeout: JOB_TIMEOUT });
  await snap('job-placed');
  console.log(`PLACED ${placed} ${node}`);

  // The operator tops its node up and begins its exit from its page.
  await page.evaluate((account) => window.__gantrySwitch(account), operator);
  await page.goto(`${base}/#/operate`);
  const row = page.locator(`[data-part="mine"] [data-node-id="${node}"]`);
  await row.locator('input[name="topUp"]').fill('25');
  await row.locator('[data-node-action="topUp"]').click();
  await page.locator(`[data-part="mine"] [data-node-id="${node}"] [data-part="stake"]`)
    .getByText(/^225\.00 gUSD/).waitFor({ timeout: JOB_TIMEOUT });
  await page.locator(`[data-part="mine"] [data-node-id="${node}"] [data-node-action="beginExit"]`).click();
  await page.locator(`[data-part="mine"] [data-node-id="${node}"][data-status="exiting"]`).waitFor({ timeout: JOB_TIMEOUT });
  // Its stake is still unbonding: the contract's refusal is said by name, nothing sent.
  const exiting = page.locator(`[data-part="mine"] [data-node-id="${node}"]`);
  await exiting.locator('[data-node-action="withdrawStake"]').click();
  await exiting.locator('[data-part="note"]').getByText(/the contract refused: NodeRegistry_StillUnbonding/).waitFor();
  await snap('operate-exiting');
  console.log(`EXITING ${node}`);

  await page.goto(`${base}/#/nodes/${node}`);
  await page.locator('main h1').waitFor();
  await page.getByText(HOSTILE).waitFor();
  assert.equal(await page.evaluate(() => window.__xss), undefined, 'no markup ran');
  assert.equal(await page.locator('img[src="x"]').count(), 0, 'no markup was made');
  await snap('node');
  assert.deepEqual(problems, [], 'errors in the page');
  console.log('OK');
} catch (error) {
  if (page) await page.screenshot({ path: `${shots}/failed-${++shot}.png`, fullPage: true }).catch(() => {});
  console.error(error);
  if (problems.length) console.error(problems.join('\n'));
  process.exitCode = 1;
} finally {
  await browser.close();
}

/** Fills the submit form with the WASM demo: the module, the dataset, no GPU. */
async function fillWasmDemo(p) {
  await p.selectOption('select[name="engine"]', 'wasm');
  await p.fill('input[name="moduleUri"]', wasm.moduleUri);
  await p.fill('input[name="moduleSha256"]', wasm.moduleSha256);
  await p.fill('textarea[name="command"]', '');
  await p.fill('textarea[name="inputs"]', `/inputs/data.csv ${wasm.inputUri} ${wasm.inputSha256}`);
  await p.fill('input[name="timeout"]', '60');
  await p.selectOption('select[name="gpu"]', 'none');
  await p.fill('input[name="gpus"]', '0');
  await p.fill('input[name="vram"]', '0');
  await p.fill('input[name="ram"]', '0.25');
  await p.fill('input[name="bounty"]', '10');
  await p.fill('input[name="hours"]', '2');
}

/** Waits for the job page the form went to; its id. */
async function jobPage(p) {
  await p.waitForFunction(() => /^#\/jobs\/\d+$/.test(location.hash), null, { timeout: JOB_TIMEOUT });
  const id = Number((await p.evaluate(() => location.hash)).split('/')[2]);
  await p.waitForFunction((job) => document.title.startsWith(`Job ${job} `), id);
  return id;
}
