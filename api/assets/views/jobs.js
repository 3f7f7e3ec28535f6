// `#/jobs[?status=…]`: the jobs, newest first, kept current by the live feed.

import { follow, getJson } from '../api.js';
import { ago, bar, money, html, imageName, status, until } from '../format.js';

const FILTERS = [
  ['', 'All'], ['open', 'Open'], ['assigned', 'Running'], ['submitted', 'Submitted'],
  ['disputed', 'Disputed'], ['completed', 'Completed'], ['failed', 'Failed'],
  ['cancelled', 'Cancelled'], ['expired', 'Expired'],
];
const PAGE = 50;
const none = html`<span class="muted">—</span>`;

/** The latest progress report of the job's current attempt, if any. */
export function currentProgress(job) {
  const p = job.progress;
  return p && p.attempt === job.attempts ? p : null;
}

/**
 * Time remaining: the worker's estimate while running, else what the chain waits for
 * (`until`: the attempt's end, the challenge window's end, the arbiter's deadline; the
 * deadline while open).
 */
function remaining(job) {
  const p = currentProgress(job);
  const waits = (label, secs) => (secs == null ? none : html`<span class="muted">${label}</span> ${until(secs)}`);
  switch (job.status) {
    case 'assigned':
      if (p?.etaSecs != null) {
        return html`${until(p.atMs / 1000 + p.etaSecs)} <span class="muted">left</span>`;
      }
      return waits('attempt ends', job.until);
    case 'open':
      return waits('deadline', job.deadline);
    case 'submitted':
      return waits('challenge', job.until);
    case 'disputed':
      return waits('arbiter', job.until);
    default:
      return none;
  }
}

function progressCell(job) {
  const fraction = currentProgress(job)?.progress;
  return fraction == null ? none : bar(fraction);
}

export const JOB_HEAD = html`<tr><th class="num">Job</th><th>Status</th><th title="the image, or the WASM module">Runs</th><th>Node</th>
  <th class="num">Bounty</th><th>Progress</th><th>Remaining</th><th>Posted</th></tr>`;

export function jobRow(job, flash = false) {
  const image = imageName(job);
  return html`<tr data-job-id="${job.jobId}" data-status="${job.status}" class="${flash ? 'flash' : ''}">
    <td class="num"><a href="#/jobs/${job.jobId}">#${job.jobId}</a></td>
    <td>${status(job.status)}</td>
    <td class="image" title="${image}">${image || none}</td>
    <td>${job.nodeId == null ? none : html`<a href="#/nodes/${job.nodeId}">node ${job.nodeId}</a>`}</td>
    <td class="num">${money(job.bounty)}</td>
    <td class="progress">${progressCell(job)}</td>
    <td>${remaining(job)}</td>
    <td>${ago(job.postedAt)}</td>
  </tr>`;
}

/** Clicking anywhere on a row opens the job. */
export function rowsOpenJobs(tbody) {
  tbody.addEventListener('click', (event) => {
    const row = event.target.closest('tr[data-job-id]');
    if (row && !event.target.closest('a')) location.hash = `#/jobs/${row.dataset.jobId}`;
  });
}

export function mount(root, query) {
  const filter = query.get('status') ?? '';
  document.title = 'Jobs · Gantry';
  root.innerHTML = html`<section>
    <header class="page">
      <h1>Jobs</h1>
      <nav class="filters">${FILTERS.map(([value, label]) => html`<a href="#/jobs${value ? `?status=${value}` : ''}"
        class="${value === filter ? 'active' : ''}">${label}</a>`)}</nav>
    </header>
    <p class="error" hidden></p>
    <div class="card flush"><table class="jobs"><thead>${JOB_HEAD}</thead><tbody></tbody></table></div>
    <button class="more" type="button" hidden>Load more</button>
  </section>`;
  const tbody = root.querySelector('tbody');
  const more = root.querySelector('.more');
  const error = root.querySelector('.error');
  rowsOpenJobs(tbody);

  const jobs = new Map();
  const changed = new Set();
  let cursor = null;
  let loaded = false;
  const url = (after) => `/v1/jobs?limit=${PAGE}${filter ? `&status=${encodeURIComponent(filter)}` : ''}${after ? `&cursor=${after}` : ''}`;

  const render = () => {
    const rows = [...jobs.values()].sort((a, b) => b.jobId - a.jobId);
    tbody.innerHTML = rows.length
      ? html`${rows.map((job) => jobRow(job, changed.has(job.jobId)))}`
      : html`<tr class="none"><td colspan="8">${loaded ? 'No jobs' : 'Loading…'}</td></tr>`;
    changed.clear();
    more.hidden = !cursor;
  };
  const add = (page) => {
    for (const job of page.items) jobs.set(job.jobId, job);
    cursor = page.nextCursor;
  };

  const stop = follow({
    types: ['job', 'progress'],
    async load() {
      const page = await getJson(url());
      jobs.clear();
      add(page);
      loaded = true;
      error.hidden = true;
      render();
    },
    apply({ type, data }) {
      const old = jobs.get(data.jobId);
      if (type === 'progress') {
        if (!old) return;
        jobs.set(data.jobId, { ...old, progress: data });
      } else if (filter && data.status !== filter) {
        if (!old) return;
        jobs.delete(data.jobId);
      } else {
        // An unseen job older than the last one loaded belongs to a page not loaded yet.
        const oldest = Math.min(...jobs.keys());
        if (!old && cursor && data.jobId < oldest) return;
        // Job events carry no progress: keep what we have.
        jobs.set(data.jobId, { ...data, progress: data.progress ?? old?.progress ?? null });
      }
      changed.add(data.jobId);
      render();
    },
    failed(e) {
      error.textContent = `Could not load the jobs: ${e.message}`;
      error.hidden = false;
    },
  });

  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      add(await getJson(url(cursor)));
      render();
    } catch (e) {
      error.textContent = `Could not load more jobs: ${e.message}`;
      error.hidden = false;
    } finally {
      more.disabled = false;
    }
  });
  render();
  return stop;
}
