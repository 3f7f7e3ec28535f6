// `#/nodes`: the providers' nodes; `#/nodes/<id>`: one node, its money in the market
// (stake and the part held for disputes, earnings, fees owed, slashes with their jobs) and
// its active jobs.

import { coalesce, follow, getJson } from '../api.js';
import {
  ago, bar, big, dateTime, gpus, money, html, mib, nowSecs, percent, short, status, until,
} from '../format.js';
import { JOB_HEAD, jobRow, rowsOpenJobs } from './jobs.js';

const none = html`<span class="muted">—</span>`;

/** Its GPUs (`no GPU` for a CPU node), as the CLI says them. */
const gpu = (node) => gpus(node.gpuCount, node.gpuModel);

// How far the API's clock (the later of its own and the chain's) runs ahead of this one,
// learnt from the heartbeat ages it gives: live node events carry only `lastHeartbeat`.
let ahead = 0;
function learnClock(node) {
  if (node.heartbeatAgeSecs != null) ahead = node.lastHeartbeat + node.heartbeatAgeSecs - nowSecs();
}

const heartbeat = (node) => ago(node.lastHeartbeat - ahead);

// Why a node takes no new work (`takesNoWork`, from the chain's facts; its `why` says
// it with amounts in base units), in words.
const NO_WORK = {
  inactive: "inactive: its worker's next heartbeat makes it active again",
  stake_below_minimum: 'stake below the minimum: no new work until its operator tops it up (gantry node topup)',
  exiting: 'exiting: no new work while its stake unbonds',
  exited: 'exited',
};
const noWorkLabel = (noWork) => NO_WORK[noWork.reason] ?? noWork.reason;

const reputation = (node) => (node.reputation == null ? none : bar(node.reputation, percent(node.reputation)));

function nodeRow(node) {
  return html`<tr data-node-id="${node.nodeId}" data-status="${node.status}">
    <td class="num"><a href="#/nodes/${node.nodeId}">node ${node.nodeId}</a></td>
    <td class="wrap">${status(node.status)}${node.takesNoWork ? html` <span class="muted" data-part="no-work" title="${node.takesNoWork.why}">${noWorkLabel(node.takesNoWork)}</span>` : ''}</td>
    <td data-part="gpus">${gpu(node)}${node.gpuCount ? html` <span class="muted">${mib(node.vramMib)}</span>` : ''}</td>
    <td class="num">${money(node.pricePerGpuHour)} <span class="muted">/ GPU-h</span></td>
    <td>${heartbeat(node)}</td>
    <td class="progress">${reputation(node)}</td>
    <td class="num">${node.activeJobs} <span class="muted">/ ${node.completedJobs} / ${node.failedJobs}</span></td>
    <td class="num">${money(node.stake)}${big(node.lockedStake) ? html` <span class="muted sub">${money(node.lockedStake)} locked</span>` : ''}</td>
    <td class="num">${money(node.earnings)}${big(node.feesOwed) ? html` <span class="muted sub">${money(node.feesOwed)} fees owed</span>` : ''}</td>
  </tr>`;
}

const COLUMNS = 9;

export function mount(root) {
  document.title = 'Nodes · Gantry';
  root.innerHTML = html`<section>
    <header class="page"><h1>Nodes</h1></header>
    <p class="error" hidden></p>
    <div class="card flush"><table class="nodes"><thead><tr><th class="num">Node</th><th>Status</th><th>GPU</th>
      <th class="num">Price</th><th>Heartbeat</th><th>Reputation</th>
      <th class="num" title="active / completed / failed">Jobs</th><th class="num">Stake</th><th class="num">Earnings</th></tr></thead>
      <tbody><tr class="none"><td colspan="${COLUMNS}">Loading…</td></tr></tbody></table></div>
    <button class="more" type="button" hidden>Load more</button>
  </section>`;
  const tbody = root.querySelector('tbody');
  const error = root.querySelector('.error');
  const more = root.querySelector('.more');
  tbody.addEventListener('click', (event) => {
    const row = event.target.closest('tr[data-node-id]');
    if (row && !event.target.closest('a')) location.hash = `#/nodes/${row.dataset.nodeId}`;
  });
  const nodes = new Map();
  let cursor = null;
  const render = () => {
    const rows = [...nodes.values()].sort((a, b) => a.nodeId - b.nodeId);
    tbody.innerHTML = rows.length
      ? html`${rows.map(nodeRow)}`
      : html`<tr class="none"><td colspan="${COLUMNS}">No nodes registered</td></tr>`;
    more.hidden = !cursor;
  };
  const add = (page) => {
    for (const node of page.items) nodes.set(node.nodeId, node);
    if (page.items.length) learnClock(page.items[0]);
    cursor = page.nextCursor;
  };
  // A node event carries the row without its reputation: after a job's outcome, ask.
  const refresh = async (id) => {
    const { jobs: _, ...node } = await getJson(`/v1/nodes/${id}`);
    nodes.set(id, node);
    render();
  };
  more.addEventListener('click', async () => {
    add(await getJson(`/v1/nodes?limit=200&cursor=${cursor}`));
    render();
  });
  return follow({
    types: ['node'],
    async load() {
      const page = await getJson('/v1/nodes?limit=200');
      nodes.clear();
      add(page);
      error.hidden = true;
      render();
    },
    apply({ data }) {
      const old = nodes.get(data.nodeId);
      // Nodes are listed by id: a new one past the loaded pages comes with "Load more".
      if (!old && cursor) return;
      nodes.set(data.nodeId, { ...old, ...data });
      render();
      const outcome = !old || old.completedJobs !== data.completedJobs || old.failedJobs !== data.failedJobs;
      if (data.reputation == null && outcome) refresh(data.nodeId).catch((e) => console.warn(e));
    },
    failed(e) {
      error.textContent = `Could not load the nodes: ${e.message}`;
      error.hidden = false;
    },
  });
}

export function mountOne(root, id) {
  document.title = `Node ${id} · Gantry`;
  root.innerHTML = html`<section>
    <header class="page"><a class="back" href="#/nodes">← Nodes</a><h1>Node ${id} <span data-part="status"></span></h1></header>
    <p class="error" hidden></p>
    <div class="grid">
      <div class="card" data-part="overview"><p class="muted">Loading…</p></div>
      <div class="card" data-part="money"></div>
    </div>
    <div class="card flush"><h2>Active jobs</h2><table class="jobs"><thead>${JOB_HEAD}</thead><tbody></tbody></table></div>
    <div class="card flush" data-part="slashes"></div>
  </section>`;
  const part = (name) => root.querySelector(`[data-part="${name}"]`);
  const error = root.querySelector('.error');
  const tbody = root.querySelector('tbody');
  rowsOpenJobs(tbody);
  let node = null;
  const render = () => {
    part('status').innerHTML = status(node.status);
    part('overview').innerHTML = html`<h2>Node</h2><dl>
      <dt>GPU</dt><dd data-part="gpus">${gpu(node)}${node.gpuCount ? `, ${mib(node.vramMib)} each` : ''}</dd>
      <dt>CPU / RAM</dt><dd>${node.cpuCores} cores, ${mib(node.ramMib)}</dd>
      <dt>Engines</dt><dd data-part="engines">${(node.engines ?? []).join(', ') || none}</dd>
      <dt>Price</dt><dd>${money(node.pricePerGpuHour)} per GPU-hour</dd>
      <dt>Concurrent jobs</dt><dd>${node.activeJobs} of ${node.maxConcurrentJobs}</dd>
      <dt>Completed / failed</dt><dd>${node.completedJobs} / ${node.failedJobs}${node.rejectedJobs ? html` <span class="muted">${node.rejectedJobs} given back</span>` : ''}</dd>
      <dt>Reputation</dt><dd class="progress">${reputation(node)}</dd>
      <dt>Heartbeat</dt><dd>${heartbeat(node)}</dd>
      ${node.takesNoWork ? html`<dt>No new work</dt><dd data-part="no-work">${noWorkLabel(node.takesNoWork)}${node.takesNoWork.since == null ? '' : html` <span class="muted">since ${dateTime(node.takesNoWork.since)}; jobs assigned before are reclaimable</span>`}</dd>` : ''}
      ${node.unbondingEndsAt == null ? '' : html`<dt>Unbonding</dt><dd>${node.unbondingEndsAt > nowSecs() ? html`ends in ${until(node.unbondingEndsAt)}` : html`ended ${dateTime(node.unbondingEndsAt)}`}</dd>`}
      <dt>Registered</dt><dd>${ago(node.registeredAt)}</dd>
      <dt>Operator</dt><dd><code title="${node.operator}">${short(node.operator)}</code></dd>
      <dt>Agent</dt><dd><code title="${node.agent}">${short(node.agent)}</code></dd>
      <dt>Metadata</dt><dd><code>${node.metadataUri || '—'}</code></dd>
    </dl>`;
    const disputes = node.disputes ?? [];
    part('money').innerHTML = html`<h2>Money</h2><dl>
      <dt>Stake</dt><dd data-part="stake">${money(node.stake)}</dd>
      <dt>Locked stake</dt><dd data-part="locked">${money(node.lockedStake)}${disputes.length ? html` <span class="muted">held for ${disputes.map((d, i) => html`${i ? ', ' : ''}<a href="#/jobs/${d.jobId}">job ${d.jobId}</a> (${money(d.exposure)})`)}</span>` : ''}</dd>
      <dt>Slashed</dt><dd>${big(node.slashed) ? html`<span class="err">${money(node.slashed)}</span>` : money(node.slashed)}</dd>
      <dt>Earnings</dt><dd data-part="earnings">${money(node.earnings)} <span class="muted">to withdraw</span></dd>
      <dt>Withdrawn</dt><dd>${money(node.earningsWithdrawn)}</dd>
      <dt>Fees owed</dt><dd data-part="fees">${money(node.feesOwed)} <span class="muted">${money(node.feesSwept)} swept to the treasury</span></dd>
      ${big(node.stakeWithdrawn) ? html`<dt>Stake withdrawn</dt><dd>${money(node.stakeWithdrawn)}</dd>` : ''}
    </dl>`;
    const jobs = node.jobs ?? [];
    tbody.innerHTML = jobs.length
      ? html`${jobs.map((job) => jobRow(job))}`
      : html`<tr class="none"><td colspan="8">${node.jobs ? 'No active jobs' : 'Not reported by this API'}</td></tr>`;
    const slashes = node.slashes ?? [];
    part('slashes').innerHTML = html`<h2>Slashes</h2><table class="compact"><thead><tr><th>Job</th>
      <th class="num">Taken</th><th class="num">Stake left</th><th>When</th><th>Transaction</th></tr></thead><tbody>
      ${slashes.length ? slashes.map((x) => html`<tr data-slash-job="${x.jobId}"><td><a href="#/jobs/${x.jobId}">job ${x.jobId}</a></td>
        <td class="num err">${money(x.amount)}</td><td class="num">${money(x.stake)}</td><td>${ago(x.at)}</td>
        <td><code title="${x.tx}">${short(x.tx)}</code> <span class="muted">block ${x.block}</span></td></tr>`)
      : html`<tr class="none"><td colspan="5">Never slashed</td></tr>`}
    </tbody></table>`;
  };
  const load = async () => {
    node = await getJson(`/v1/nodes/${id}`);
    learnClock(node);
    error.hidden = true;
    render();
  };
  const failed = (e) => {
    error.textContent = e.status === 404 ? `There is no node ${id}.` : `Could not load node ${id}: ${e.message}`;
    error.hidden = false;
  };
  const reload = coalesce(() => load().catch(failed));
  return follow({
    types: ['node', 'job', 'progress'],
    load,
    apply({ type, data }) {
      const mine = type === 'node'
        ? data.nodeId === id
        : data.nodeId === id || (node?.jobs ?? []).some((job) => job.jobId === data.jobId);
      if (!mine) return;
      reload();
    },
    failed,
  });
}
