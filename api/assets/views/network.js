// `#/network`: figures for the whole network (jobs, nodes, GPUs, the money: volume, pay,
// fees, refunds, stake, slashes, the treasury; the policy in force) and its last hour
// minute by minute.

import { coalesce, follow, getJson } from '../api.js';
import { barChart, lineChart } from '../charts.js';
import { clock, html, symbol, tokens } from '../format.js';

const MINUTES = 60;
/** At most one refresh per this long while events pour in. */
const REFRESH_GAP_MS = 2000;
/** The minute buckets roll over even when nothing happens. */
const ROLL_MS = 30_000;

const amount = (base) => html`${tokens(base)} <span class="unit">${symbol()}</span>`;

function tile(label, value, note = '') {
  return html`<div class="tile"><div class="label">${label}</div><div class="value">${value}</div>
    ${note ? html`<div class="note">${note}</div>` : ''}</div>`;
}

export function mount(root) {
  document.title = 'Network · Gantry';
  root.innerHTML = html`<section>
    <header class="page"><h1>Network</h1><span class="muted">last ${MINUTES} minutes</span></header>
    <p class="error" hidden></p>
    <div class="tiles" data-part="tiles"></div>
    <div class="grid thirds">
      <div class="card"><h2>Jobs per minute</h2><div data-part="jobs-chart"></div></div>
      <div class="card"><h2>GPUs in use</h2><div data-part="gpus-chart"></div></div>
      <div class="card"><h2>GPU utilisation</h2><div data-part="util-chart"></div></div>
    </div>
  </section>`;
  const part = (name) => root.querySelector(`[data-part="${name}"]`);
  const error = root.querySelector('.error');

  const render = (stats, history) => {
    const jobs = stats.jobsByStatus ?? {};
    const nodes = stats.nodesByStatus ?? {};
    const total = Object.values(jobs).reduce((a, n) => a + n, 0);
    part('tiles').innerHTML = html`
      ${tile('Jobs', total, `${jobs.open ?? 0} open · ${jobs.assigned ?? 0} running${jobs.disputed ? ` · ${jobs.disputed} disputed` : ''}`)}
      ${tile('Completed', jobs.completed ?? 0, `${(jobs.failed ?? 0) + (jobs.expired ?? 0)} failed or expired`)}
      ${tile('Active nodes', nodes.active ?? 0, `${Object.values(nodes).reduce((a, n) => a + n, 0)} registered`)}
      ${tile('Active GPUs', stats.activeGpus ?? 0)}
      ${tile('GPU-hours', stats.gpuHours == null ? '—' : (+stats.gpuHours).toFixed(1))}
      ${tile('Volume posted', stats.volume == null ? '—' : amount(stats.volume))}
      ${tile('Paid to providers', amount(stats.paidToProviders), stats.fees == null ? '' : html`${tokens(stats.fees)} ${symbol()} protocol fees`)}
      ${stats.refunded == null ? '' : tile('Refunded', amount(stats.refunded), 'to submitters')}
      ${stats.stake == null ? '' : tile('Stake', amount(stats.stake), html`${tokens(stats.lockedStake)} ${symbol()} locked in disputes`)}
      ${stats.slashed == null ? '' : tile('Slashed', amount(stats.slashed), 'to the treasury')}
      ${stats.treasury == null ? '' : tile('Treasury', amount(stats.treasury))}
      ${stats.policyVersion == null ? '' : tile('Policy', `v${stats.policyVersion}`, stats.paused ? 'paused: no new jobs or nodes' : 'taking jobs')}`;
    const buckets = history.buckets ?? [];
    part('jobs-chart').innerHTML = barChart({
      title: 'Jobs per minute',
      buckets: buckets.map((b) => ({ x: b.at, values: [b.posted, b.completed, b.failed] })),
      labels: ['posted', 'completed', 'failed'],
      xFormat: clock,
    });
    part('gpus-chart').innerHTML = lineChart({
      title: 'GPUs in use',
      series: [{ label: 'GPUs in use', points: buckets.map((b) => [b.at, b.gpusInUse]) }],
      xFormat: clock, yFormat: String, counts: true,
    });
    part('util-chart').innerHTML = lineChart({
      title: 'GPU utilisation',
      series: [{ label: 'utilisation', points: buckets.map((b) => [b.at, b.gpuUtilization]) }],
      xFormat: clock, yFormat: (v) => `${Math.round(v)}%`, yMax: 100,
    });
  };

  const load = async () => {
    const [stats, history] = await Promise.all([
      getJson('/v1/stats'),
      getJson(`/v1/stats/history?minutes=${MINUTES}`),
    ]);
    error.hidden = true;
    render(stats, history);
  };
  const failed = (e) => {
    error.textContent = `Could not load the network figures: ${e.message}`;
    error.hidden = false;
  };
  const refresh = coalesce(async () => {
    await load().catch(failed);
    await new Promise((resolve) => { setTimeout(resolve, REFRESH_GAP_MS); });
  });
  const roll = setInterval(refresh, ROLL_MS);
  const stop = follow({ types: ['job', 'node', 'progress'], load, apply: refresh, failed });
  return () => {
    clearInterval(roll);
    stop();
  };
}
