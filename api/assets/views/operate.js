// Run a node (`#/operate`): register one from the wallet (its capabilities, price, slots,
// engines, stake and agent), then see each of the account's nodes (status, stake,
// earnings, running jobs, slashes) and top up, begin the exit, withdraw. Registering
// prints the worker's config file, ready to paste.
//
// The agent is the key the worker signs with. By default the page makes a new one (in
// this browser's memory only), has it sign its consent to serve the operator (EIP-712
// `AgentConsent`, as the market requires) and shows it once, for the worker's key file.

import { getJson, live } from '../api.js';
import { baseUnits, html, mib, modelId, money, short, status as statusBadge, symbol } from '../format.js';
import { ethers, networkInfo, readyMessage, reason, wallet } from '../wallet.js';

/** A consent made here is good for this long (as the CLI's). */
const CONSENT_SECS = 600;

export function mount(root) {
  root.innerHTML = html`<section class="card form" data-page="operate">
    <h1>Run a node</h1>
    <p class="muted">Register your machine: the market checks jobs against what you declare, and your stake
      answers for the node's faults (never for a job's own). From a terminal: <code>gantry node register</code>.</p>
    <form id="register-form" novalidate>
      <fieldset><legend>The machine</legend>
        <label>GPU model (empty: no GPU) <input name="gpuModel" placeholder="NVIDIA H100 80GB HBM3" autocomplete="off"></label>
        <label>GPUs <input name="gpuCount" type="number" min="0" max="65535" value="0"></label>
        <label>VRAM per GPU, MiB <input name="vramMiB" type="number" min="0" value="0"></label>
        <label>CPU cores <input name="cpuCores" type="number" min="1" max="65535" value="4"></label>
        <label>RAM, MiB <input name="ramMiB" type="number" min="0" value="8192"></label>
        <label>Engines
          <span><input type="checkbox" name="docker" checked> Docker</span>
          <span><input type="checkbox" name="wasm" checked> WASM</span></label>
      </fieldset>
      <fieldset><legend>The terms</legend>
        <label>Price per GPU-hour, ${symbol()} <input name="price" inputmode="decimal" value="1"></label>
        <label>Jobs at once (slots), 1–255 <input name="slots" type="number" min="1" max="255" value="1"></label>
        <label>Stake, ${symbol()} (empty: twice the minimum) <input name="stake" inputmode="decimal"></label>
        <label>Metadata URI (optional) <input name="metadataURI"></label>
        <label>Agent
          <select name="agent"><option value="new">a new agent key, made here for the worker</option>
            <option value="self">my own account (the worker signs with my key)</option></select></label>
      </fieldset>
      <div class="notice error" data-part="errors" aria-live="polite"></div>
      <button type="submit" data-action="register">Approve the stake and register</button>
      <span class="muted" data-part="progress"></span>
    </form>
    <div data-part="config"></div>
  </section>
  <section class="card" data-part="mine"><h2>Your nodes</h2><p class="muted">Connect your wallet to see them.</p></section>`;
  const form = root.querySelector('form');
  const errors = form.querySelector('[data-part="errors"]');
  const progress = form.querySelector('[data-part="progress"]');
  const mine = root.querySelector('[data-part="mine"]');
  const showMine = () => renderMine(mine).catch((error) => { mine.innerHTML = html`<h2>Your nodes</h2><p class="warn">${reason(error)}</p>`; });

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    errors.textContent = '';
    const button = form.querySelector('button[type="submit"]');
    button.disabled = true;
    try {
      if (wallet.status() !== 'ready') throw new Error(readyMessage());
      const { nodeId, agentKey } = await register(form, (step) => { progress.textContent = step; });
      progress.textContent = `node ${nodeId} registered`;
      root.querySelector('[data-part="config"]').innerHTML = await configCard(nodeId, agentKey);
      showMine();
    } catch (error) {
      errors.textContent = reason(error);
      progress.textContent = '';
    } finally {
      button.disabled = false;
    }
  });
  mine.addEventListener('click', async (event) => {
    const button = event.target.closest('[data-node-action]');
    if (!button) return;
    const row = button.closest('[data-node-id]');
    const note = row.querySelector('[data-part="note"]');
    button.disabled = true;
    try {
      note.textContent = await nodeAction(button.dataset.nodeAction, BigInt(row.dataset.nodeId), row);
      showMine();
    } catch (error) {
      note.textContent = reason(error);
    } finally {
      button.disabled = false;
    }
  });
  const offWallet = wallet.on(showMine);
  // A node registered, slashed or paid: the account's own rows again.
  const offLive = live.on('node', (row) => {
    if (wallet.account && row.operator?.toLowerCase() === wallet.account.toLowerCase()) showMine();
  });
  showMine();
  return () => {
    offWallet();
    offLive();
  };
}

/** A decimal amount of tokens in base units; throws naming `what` when it is not one. */
function amount(text, what) {
  const value = baseUnits(text);
  if (value === null) throw new Error(`${what}: an amount of ${symbol()}`);
  return value;
}

/** Approves the stake, has the agent consent (a new key, or the operator itself) and
 * registers; the new node's id and the agent key made here (none for the operator). */
async function register(form, step) {
  const e = await ethers();
  const { market, registry, token, signer } = await wallet.contracts();
  const n = (name) => Number(form[name].value);
  const engines = (form.docker.checked ? 1 : 0) | (form.wasm.checked ? 2 : 0);
  if (!engines) throw new Error('engines: at least one');
  const model = form.gpuModel.value.trim();
  if (model && n('gpuCount') < 1) throw new Error('GPUs: a GPU model needs at least one GPU');
  if (!model && n('gpuCount') > 0) throw new Error('GPU model: name the model of your GPUs');
  const caps = [model ? modelId(model) : e.ZeroHash, n('gpuCount'), n('vramMiB'), n('cpuCores'),
    n('ramMiB'), amount(form.price.value, 'price'), n('slots'), engines];
  const params = await market.params();
  const stake = form.stake.value.trim() ? amount(form.stake.value, 'stake') : 2n * params.minStake;
  if (stake < params.minStake) throw new Error(`stake: at least the minimum, ${money(params.minStake)}`);

  let agent = wallet.account;
  let agentKey = null;
  let consentDeadline = 0n;
  let consent = '0x';
  if (form.agent.value === 'new') {
    const key = e.Wallet.createRandom();
    agent = key.address;
    agentKey = key.privateKey;
    const chainNow = (await signer.provider.getBlock('latest')).timestamp;
    consentDeadline = BigInt(chainNow + CONSENT_SECS);
    const domain = await registry.eip712Domain();
    consent = await key.signTypedData(
      { name: domain[1], version: domain[2], chainId: domain[3], verifyingContract: domain[4] },
      { AgentConsent: [
        { name: 'operator', type: 'address' }, { name: 'agent', type: 'address' },
        { name: 'nonce', type: 'uint256' }, { name: 'deadline', type: 'uint256' },
      ] },
      { operator: wallet.account, agent, nonce: await registry.agentNonce(agent), deadline: consentDeadline },
    );
  }
  const allowance = await token.allowance(wallet.account, market.target);
  if (allowance < stake) {
    step('approve the stake in your wallet…');
    await wallet.confirm(token.approve(market.target, stake));
  }
  step('confirm the registration in your wallet…');
  const receipt = await wallet.confirm(
    registry.register(caps, form.metadataURI.value.trim(), stake, agent, consentDeadline, consent),
  );
  wallet.refresh();
  for (const log of receipt.logs) {
    const parsed = registry.interface.parseLog(log);
    if (parsed?.name === 'NodeRegistered') return { nodeId: Number(parsed.args.nodeId), agentKey };
  }
  throw new Error(`no NodeRegistered in ${receipt.hash}`);
}

/** The worker's config file for the node, and its agent key when made here. */
async function configCard(nodeId, agentKey) {
  const n = await networkInfo();
  // TOML basic strings are JSON strings (quotes and control characters escaped).
  const q = (value) => JSON.stringify(String(value));
  const toml = [
    `# gantry-worker config for node ${nodeId}; the agent key goes in agent_key_file.`,
    n.rpcUrl ? `rpc_url = ${q(n.rpcUrl)}` : '# rpc_url = "<your node of the chain>"',
    `chain_id = ${Number(n.chainId)}`,
    n.natsUrl ? `nats_url = ${q(n.natsUrl)}` : '# nats_url = "nats://<the network\'s NATS>:4222"',
    `market = ${q(n.market)}`,
    `registry = ${q(n.market)}`,
    `token = ${q(n.token)}`,
    `start_block = ${Number(n.startBlock)}`,
    'agent_key_file = "/etc/gantry/agent.key"',
    'cache_dir = "/var/lib/gantry/cache"',
    'work_dir = "/var/lib/gantry/work"',
    '',
    '[node]',
    `node_id = ${nodeId}`,
  ].join('\n');
  return html`<div class="card" data-part="worker-config">
    <h2>Node ${nodeId}: the worker's config</h2>
    <pre data-part="toml">${toml}</pre>
    ${agentKey ? html`<p><strong>The agent key</strong>, shown once: save it as <code>/etc/gantry/agent.key</code> (mode 0600).
      It signs the node's heartbeats and results; it holds no stake.</p><pre data-part="agent-key">${agentKey}</pre>` : html`<p>The worker signs with your own key (<code>GANTRY_AGENT_KEY</code>).</p>`}
  </div>`;
}

/** The connected account's nodes, with their money and the actions their status allows. */
async function renderMine(el) {
  if (wallet.status() !== 'ready') {
    el.innerHTML = html`<h2>Your nodes</h2><p class="muted">${readyMessage()}</p>`;
    return;
  }
  const page = await getJson('/v1/nodes?limit=200');
  const account = wallet.account.toLowerCase();
  const nodes = page.items.filter((n) => n.operator.toLowerCase() === account);
  el.innerHTML = html`<h2>Your nodes</h2>${nodes.length ? html`<table class="nodes-mine">
    <thead><tr><th>Node</th><th>Status</th><th>Machine</th><th class="num">Stake</th><th class="num">Earnings</th><th class="num">Slashed</th><th>Jobs</th><th></th></tr></thead>
    <tbody>${nodes.map((n) => html`<tr data-node-id="${n.nodeId}" data-status="${n.status}">
      <td><a href="#/nodes/${n.nodeId}">node ${n.nodeId}</a><div class="muted">agent ${short(n.agent)}</div></td>
      <td>${statusBadge(n.status)}</td>
      <td>${n.gpuCount ? `${n.gpuCount}× ${n.gpuModel}` : 'no GPU'}, ${n.cpuCores} CPU, ${mib(n.ramMib)}</td>
      <td class="num" data-part="stake">${money(n.stake)}${BigInt(n.lockedStake) ? html`<div class="muted">${money(n.lockedStake)} locked</div>` : ''}</td>
      <td class="num" data-part="earnings">${money(n.earnings)}${BigInt(n.earningsWithdrawn) ? html`<div class="muted">${money(n.earningsWithdrawn)} withdrawn</div>` : ''}</td>
      <td class="num">${money(n.slashed)}</td>
      <td>${n.activeJobs} running, ${n.completedJobs} done</td>
      <td class="actions">
        <input name="topUp" inputmode="decimal" placeholder="${symbol()}" size="6">
        <button type="button" data-node-action="topUp">Top up</button>
        <button type="button" data-node-action="withdrawEarnings">Withdraw earnings</button>
        <button type="button" data-node-action="beginExit">Begin exit</button>
        <button type="button" data-node-action="withdrawStake">Withdraw stake</button>
        <div class="muted" data-part="note"></div>
      </td></tr>`)}</tbody></table>` : html`<p class="muted">No node is registered by ${short(wallet.account)}.</p>`}`;
}

/** One of a node's actions; what was done, in words. */
async function nodeAction(action, nodeId, row) {
  const { registry, token, market } = await wallet.contracts();
  if (action === 'topUp') {
    const value = amount(row.querySelector('[name="topUp"]').value, 'top up');
    if ((await token.allowance(wallet.account, market.target)) < value) {
      await wallet.confirm(token.approve(market.target, value));
    }
    await wallet.confirm(registry.topUpStake(nodeId, value));
    wallet.refresh();
    return `staked ${money(value)} more`;
  }
  await wallet.confirm(registry[action](nodeId));
  wallet.refresh();
  return { withdrawEarnings: 'earnings withdrawn', beginExit: 'exit begun: the stake unbonds', withdrawStake: 'stake withdrawn' }[action];
}
