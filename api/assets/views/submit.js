// Submit a job (`#/submit`): the spec and the requirements in a form, checked by the same
// rules as the CLI and the worker (validate.js, held to spec.rs by a shared corpus) and
// against the nodes there are now ("why would this wait?"), then posted by the wallet with
// an EIP-2612 permit: one signature and one transaction. The job's page follows it.

import { getJson, live } from '../api.js';
import { baseUnits, html, modelId, symbol } from '../format.js';
import { SPEC_VERSION, validateRequirements, validateSpec } from '../validate.js';
import { ethers, readyMessage, reason, wallet } from '../wallet.js';

/** A permit is good for this long (as the CLI's). */
const PERMIT_SECS = 3600;
/** What the worker needs beyond the spec's timeout to start and answer (`runtime_for`). */
const SETUP_ALLOWANCE_SECS = 120;
const UINT96_MAX = (1n << 96n) - 1n;

export function mount(root) {
  let nodes = [];
  root.innerHTML = html`<section class="card form" data-page="submit">
    <h1>Submit a job</h1>
    <p class="muted">Your wallet signs a permit for the bounty and sends one transaction to the market;
      the bounty stays in escrow until the job is paid, refunded or cancelled. From a terminal:
      <code>gantry job submit</code>.</p>
    <form id="submit-form" novalidate>
      <fieldset><legend>What runs</legend>
        <label>Engine <select name="engine">
          <option value="docker">Docker image</option><option value="wasm">WASM module (CPU)</option></select></label>
        <label data-engine="docker">Image <input name="image" placeholder="ghcr.io/you/train:1" autocomplete="off"></label>
        <label data-engine="wasm">Module URI <input name="moduleUri" placeholder="https://…/job.wasm"></label>
        <label data-engine="wasm">Module SHA-256 <input name="moduleSha256" placeholder="64 hex digits"></label>
        <label>Command, one argument per line <textarea name="command" rows="2"></textarea></label>
        <label>Environment, <code>NAME=value</code> per line <textarea name="env" rows="2"></textarea></label>
        <label>Inputs, <code>/inputs/path URI SHA-256</code> per line <textarea name="inputs" rows="2"></textarea></label>
        <label>Output directory <input name="outputs" value="/outputs"></label>
        <label>Timeout, seconds <input name="timeout" type="number" min="1" value="600"></label>
      </fieldset>
      <fieldset><legend>What it needs</legend>
        <label>GPU <select name="gpu"><option value="none">no GPU (CPU only)</option><option value="any">any GPU model</option></select></label>
        <label>GPUs <input name="gpus" type="number" min="0" max="65535" value="0"></label>
        <label>VRAM per GPU, GiB <input name="vram" type="number" min="0" value="0"></label>
        <label>CPU cores <input name="cpus" type="number" min="0" max="65535" value="1"></label>
        <label>RAM, GiB <input name="ram" type="number" min="0" step="0.25" value="1"></label>
        <label>Highest price per GPU-hour, ${symbol()} (empty: any) <input name="maxPrice" inputmode="decimal"></label>
        <label>Priority, 1 (lowest) to 10 <input name="priority" type="number" min="1" max="10" value="5"></label>
      </fieldset>
      <fieldset><legend>What it pays</legend>
        <label>Bounty, ${symbol()} <input name="bounty" inputmode="decimal" value="10"></label>
        <label>Deadline, hours from now <input name="hours" type="number" min="0.1" step="0.1" value="24"></label>
      </fieldset>
      <div class="notice" data-part="wait" aria-live="polite"></div>
      <div class="notice error" data-part="errors" aria-live="polite"></div>
      <button type="submit" data-action="post">Sign and post</button>
      <span class="muted" data-part="progress"></span>
    </form>
  </section>`;
  const form = root.querySelector('form');
  const errors = form.querySelector('[data-part="errors"]');
  const progress = form.querySelector('[data-part="progress"]');
  const showEngine = () => {
    for (const el of form.querySelectorAll('[data-engine]')) el.hidden = el.dataset.engine !== form.engine.value;
  };
  const explain = () => {
    const built = build(form);
    form.querySelector('[data-part="wait"]').innerHTML = built.requirements ? waitNotice(built.requirements, nodes) : '';
  };
  form.addEventListener('input', () => { showEngine(); explain(); });
  showEngine();
  getJson('/v1/nodes?limit=200').then((page) => {
    nodes = page.items;
    const models = [...new Set(nodes.filter((n) => n.status !== 'exited' && n.gpuModel).map((n) => n.gpuModel))].sort();
    form.gpu.insertAdjacentHTML('beforeend', html`${models.map((m) => html`<option value="${m}">${m}</option>`)}`.text);
    explain();
  }, (error) => console.warn('nodes', error));

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    errors.textContent = '';
    const built = build(form);
    if (built.errors.length) {
      errors.innerHTML = html`<ul>${built.errors.map((e) => html`<li data-error>${e}</li>`)}</ul>`;
      return;
    }
    if (wallet.status() !== 'ready') {
      errors.textContent = readyMessage();
      return;
    }
    const button = form.querySelector('button[type="submit"]');
    button.disabled = true;
    try {
      const jobId = await post(built, (step) => { progress.textContent = step; });
      progress.textContent = `posted as job ${jobId}; waiting for the API to see it…`;
      await projected(jobId);
      location.hash = `#/jobs/${jobId}`;
    } catch (error) {
      errors.textContent = reason(error);
      progress.textContent = '';
    } finally {
      button.disabled = false;
    }
  });
  return () => {};
}

const lines = (text) => text.split('\n').map((l) => l.trim()).filter(Boolean);

/** The form as a spec, requirements, bounty and deadline, with every refusal in words
 * (the spec's as the protocol words them). */
export function build(form) {
  const errors = [];
  const value = (name) => form[name].value.trim();
  const engine = value('engine');
  const spec = { version: SPEC_VERSION, outputs: { path: value('outputs') || '/outputs' } };
  if (engine === 'wasm') {
    spec.engine = 'wasm';
    spec.wasm = { module: { uri: value('moduleUri'), sha256: value('moduleSha256').toLowerCase() } };
  } else {
    spec.image = value('image');
  }
  spec.command = lines(form.command.value);
  spec.env = {};
  for (const line of lines(form.env.value)) {
    const at = line.indexOf('=');
    if (at < 1) errors.push(`environment: "${line}" is not NAME=value`);
    else spec.env[line.slice(0, at)] = line.slice(at + 1);
  }
  spec.inputs = lines(form.inputs.value).map((line) => {
    const [path, uri, sha256, ...rest] = line.split(/\s+/);
    if (!uri || rest.length) errors.push(`inputs: "${line}" is not PATH URI [SHA-256]`);
    return sha256 ? { path, uri, sha256: sha256.toLowerCase() } : { path, uri };
  });
  spec.timeoutSecs = Number(value('timeout'));
  const text = JSON.stringify(spec);
  const checked = validateSpec(text);
  if (!checked.ok) errors.push(checked.message);

  const gpu = value('gpu');
  const gpus = Number(value('gpus'));
  const vramMiB = Math.round(Number(value('vram')) * 1024);
  const ramMiB = Math.round(Number(value('ram')) * 1024);
  const cpus = Number(value('cpus'));
  const priority = Number(value('priority'));
  const int = (n, max) => Number.isInteger(n) && n >= 0 && n <= max;
  if (!int(gpus, 65535)) errors.push('GPUs: a whole number, 0 to 65535');
  if (!int(cpus, 65535)) errors.push('CPU cores: a whole number, 0 to 65535');
  if (!int(vramMiB, 2 ** 32 - 1) || !int(ramMiB, 2 ** 32 - 1)) errors.push('VRAM and RAM: a size in GiB');
  if (!int(priority, 255)) errors.push('priority: a whole number, 1 (lowest) to 10');
  // The form's own sense (the market's rules are checked below).
  if (engine === 'docker' && gpu === 'any' && gpus === 0) errors.push('GPUs: a GPU job needs at least one GPU');
  if (gpu === 'none' && gpus > 0) errors.push('GPUs: choose "any GPU model" or a model to ask for GPUs');
  const maxPriceText = value('maxPrice');
  const maxPrice = maxPriceText ? baseUnits(maxPriceText) : UINT96_MAX;
  if (maxPrice === null || maxPrice > UINT96_MAX) errors.push(`highest price: an amount of ${symbol()}`);
  const bounty = baseUnits(value('bounty'));
  if (bounty === null || bounty === 0n || bounty > UINT96_MAX) errors.push(`bounty: an amount of ${symbol()}, more than 0`);
  const hours = Number(value('hours'));
  const maxRuntime = Number.isInteger(spec.timeoutSecs) ? spec.timeoutSecs + SETUP_ALLOWANCE_SECS : 0;
  if (!(hours > 0) || hours * 3600 < maxRuntime) {
    errors.push(`deadline: at least the job's runtime (${Math.ceil(maxRuntime / 60)} minutes: its timeout and ${SETUP_ALLOWANCE_SECS} s to start and answer)`);
  }
  const requirements = {
    gpuModel: gpu === 'none' || gpu === 'any' ? `0x${'0'.repeat(64)}` : modelId(gpu),
    gpuModelName: gpu === 'none' || gpu === 'any' ? '' : gpu,
    minGpuCount: gpus,
    minVramMiB: vramMiB,
    minCpuCores: cpus,
    minRamMiB: ramMiB,
    maxPricePerGpuHour: maxPrice ?? UINT96_MAX,
    maxRuntime,
    priority,
    engine: engine === 'wasm' ? 1 : 0,
  };
  // The market's posting rules, as the protocol words them.
  const refused = validateRequirements(requirements);
  if (refused) errors.push(`requirements field ${refused.field}: ${refused.reason}`);
  return { errors, spec: text, requirements, bounty, hours };
}


/** Which nodes could take the job now, or why none can (the market's capability checks,
 * as the matcher explains a waiting job). */
export function waitNotice(r, nodes) {
  const why = new Map();
  let fit = 0;
  for (const n of nodes) {
    const missing = [];
    if (n.status !== 'active') missing.push('not active');
    if (!n.engines?.includes(r.engine === 1 ? 'wasm' : 'docker')) missing.push('engine');
    if (r.gpuModelName && n.gpuModel !== r.gpuModelName) missing.push('GPU model');
    if (n.gpuCount < r.minGpuCount) missing.push('GPU count');
    if (n.vramMib < r.minVramMiB) missing.push('VRAM');
    if (n.cpuCores < r.minCpuCores) missing.push('CPU cores');
    if (n.ramMib < r.minRamMiB) missing.push('RAM');
    if (BigInt(n.pricePerGpuHour) > BigInt(r.maxPricePerGpuHour)) missing.push('price');
    if (!missing.length) fit += 1;
    for (const m of missing) why.set(m, (why.get(m) ?? 0) + 1);
  }
  if (fit) return html`<span data-wait="fits">${fit} of ${nodes.length} nodes can run it now.</span>`;
  if (!nodes.length) return html`<span data-wait="none">No node is registered: it would wait for one.</span>`;
  const reasons = [...why].sort((a, b) => b[1] - a[1]).map(([m, count]) => `${m} (${count})`).join(', ');
  return html`<span data-wait="none">It would wait: none of the ${nodes.length} nodes can run it now. Short of: ${reasons}.</span>`;
}

/** Resolves once the API has job `jobId` (its live feed announces it, or it answers),
 * or after half a minute (the job page then waits for it itself). */
function projected(jobId) {
  return new Promise((resolve) => {
    const done = () => {
      off();
      clearTimeout(timer);
      resolve();
    };
    const off = live.on('job', (row) => { if (row.jobId === jobId) done(); });
    const timer = setTimeout(done, 30_000);
    // Already there? Jobs are projected in order: the newest at least this one.
    getJson('/v1/jobs?limit=1').then((page) => {
      if ((page.items[0]?.jobId ?? 0) >= jobId) done();
    }, () => {});
  });
}

/** Signs the permit, posts the job and returns its id. */
async function post(built, step) {
  const e = await ethers();
  const { market, signer } = await wallet.contracts();
  const chainNow = (await signer.provider.getBlock('latest')).timestamp;
  const deadline = BigInt(Math.floor(chainNow + built.hours * 3600));
  const r = built.requirements;
  const requirements = [r.gpuModel, r.minGpuCount, r.minVramMiB, r.minCpuCores, r.minRamMiB,
    r.maxPricePerGpuHour, r.maxRuntime, r.priority, r.engine];
  const spec = e.toUtf8Bytes(built.spec);
  const { credits } = await wallet.balances();
  let tx;
  if (credits >= built.bounty) {
    step('posting from your credits…');
    tx = market.postJob(requirements, built.bounty, deadline, spec);
  } else {
    step('sign the permit for the bounty in your wallet…');
    const permitDeadline = BigInt(chainNow + PERMIT_SECS);
    const { v, r: sigR, s } = await wallet.permit(await market.getAddress(), built.bounty, permitDeadline);
    step('confirm the transaction in your wallet…');
    tx = market.postJobWithPermit(requirements, built.bounty, deadline, spec, permitDeadline, v, sigR, s);
  }
  const receipt = await wallet.confirm(tx);
  wallet.refresh();
  for (const log of receipt.logs) {
    const parsed = market.interface.parseLog(log);
    if (parsed?.name === 'JobPosted') return Number(parsed.args.jobId);
  }
  throw new Error(`no JobPosted in ${receipt.hash}`);
}
