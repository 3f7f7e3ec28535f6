// `#/jobs/<id>`: one job — overview (terms, policy, what it waits for), progress, why it
// is pending, a verified job's seats (who committed, revealed, agreed; a refereed job's
// dispute), its dispute (bond, exposure, deadline, outcome), result and money (payout,
// fee, refund, and where the nodes' slashes went), each attempt (its node, how it ended,
// whose fault, why, the slash and the treasury it went to), the nodes barred from it and
// what they were charged, progress/loss/GPU charts, live logs, timeline and spec.

import { coalesce, follow, getJson } from '../api.js';
import { lineChart } from '../charts.js';
import {
  ago, bar, big, bytes, bytes32Text, dateTime, duration, gpus, jobSpec, jsonObject, money, html,
  mib, nowSecs, percent, priceLimit, short, status, until,
} from '../format.js';
import { currentProgress } from './jobs.js';
import { actionsBar, bindActions } from './actions.js';
import { wallet } from '../wallet.js';

const MAX_LOG_LINES = 2000;
/** Progress reports kept for the charts (the oldest go first). */
const MAX_REPORTS = 5000;
/** The events' amounts in the token (their uint96 and uint256 fields, but `Drawn.seats`),
 * and those of the parameters and capabilities they carry. */
const AMOUNT_FIELDS = new Set([
  'amount', 'bond', 'bondToProvider', 'bondToSubmitter', 'bounty', 'charged', 'exposure', 'fee',
  'forfeited', 'fromCredits', 'locked', 'payout', 'prepay', 'refund', 'seatStake', 'stake',
  'toProvider', 'toSubmitter', 'unlocked',
  'disputeBond', 'minStake', 'poolFloor', 'seatFloor', 'minVerifiedBounty', 'pricePerGpuHour',
  'maxPricePerGpuHour',
]);
/** Event fields that are chain times (besides `…At`). */
const TIME_FIELDS = new Set(['deadline', 'until', 'commitEnd', 'revealBy', 'lastHeartbeat', 'at']);
/** The events' enums in words, by event and field: `CompletionKind`, `FailureKind`,
 * `ReclaimKind` (contracts/src/types/Types.sol) and the referees' outcome
 * (`IVerificationEvents.RefereesDecided`). */
const ENUMS = {
  JobCompleted: {
    kind: ['accepted', 'finalized', 'dispute won', 'dispute lapsed', 'upheld by the referees'],
  },
  JobFailed: {
    kind: ['out of attempts', 'past its deadline', 'dispute lost', 'no quorum', 'overturned by the referees'],
  },
  JobReclaimed: { kind: ['node inactive', 'runtime exceeded'] },
  RefereesDecided: {
    outcome: ['upheld', 'overturned', 'no majority: the arbiter decides', 'overturned: the provider never revealed'],
  },
};
/** Bits of a node id in `Drawn.seats` (seat i's at bits [48i, 48i + 47]). */
const SEAT_BITS = 48n;
/** The API's names of them. */
const COMPLETION = {
  accepted: 'accepted by the submitter',
  finalized: 'challenge window closed',
  disputeWon: 'dispute won by the provider',
  disputeLapsed: 'dispute lapsed: the result stands',
  verified: 'verified: a quorum of replicas agreed',
  refereesUpheld: 'upheld by the referees',
};
const FAILURE = {
  outOfAttempts: 'out of attempts',
  pastDeadline: 'no attempt fits before the deadline',
  disputeLost: 'dispute lost by the provider',
  noQuorum: 'no quorum: the replicas did not agree',
  refereesOverturned: 'overturned by the referees',
};
const CHARGE = {
  reject: 'gave the job back',
  nodeInactive: 'reclaimed: node inactive',
  runtimeExceeded: 'reclaimed: ran past its runtime',
  disputeLost: 'lost the dispute',
};
/** How an attempt ended (`AttemptRow.outcome`). */
const OUTCOME = {
  running: 'running',
  submitted: 'submitted a result',
  failedByItself: 'the job failed by itself',
  rejected: 'gave the job back',
  reclaimedNodeInactive: 'reclaimed: node inactive',
  reclaimedRuntimeExceeded: 'reclaimed: ran past its runtime',
  disputeLost: 'lost the dispute',
};
/** A worker's report of an attempt (`CompletionReport.status`). */
const REPORT = { submitted: 'submitted', jobFault: "the job's fault", nodeFault: "the node's fault" };
/** Whose fault an attempt's end was (`AttemptRow.fault`). */
const FAULT = { none: '', job: "the job's", node: "the node's" };
/** What a job waits for (`until`), by status. */
const UNTIL = {
  assigned: 'Attempt ends',
  submitted: 'Challenge window ends',
  disputed: 'Arbiter decides by',
};
/** Event fields the page shows elsewhere (the spec has its own card). */
const HIDDEN_FIELDS = new Set(['jobId', 'spec', 'specHash', 'submitter', 'requirements']);
const SETTLED = new Set(['completed', 'failed', 'cancelled', 'expired']);
const none = html`<span class="muted">—</span>`;

export function mount(root, id) {
  document.title = `Job ${id} · Gantry`;
  root.innerHTML = html`<section class="job">
    <header class="page">
      <a class="back" href="#/jobs">← Jobs</a>
      <h1>Job #${id} <span data-part="status"></span></h1>
    </header>
    <div class="job-actions" data-part="actions"><span data-part="action-buttons"></span><span class="muted" data-part="action-note" aria-live="polite"></span></div>
    <p class="error" hidden></p>
    <div class="grid">
      <div class="card" data-part="overview"><p class="muted">Loading…</p></div>
      <div class="card" data-part="progress"></div>
      <div class="card" data-part="pending" hidden></div>
      <div class="card" data-part="dispute" hidden></div>
      <div class="card" data-part="result" hidden></div>
      <div class="card" data-part="charges" hidden></div>
    </div>
    <div class="card" data-part="verification" hidden></div>
    <div class="card" data-part="attempts" hidden></div>
    <div class="grid thirds" data-part="charts" hidden>
      <div class="card"><h2>Progress</h2><div data-part="progress-chart"></div></div>
      <div class="card"><h2>Loss</h2><div data-part="loss-chart"></div></div>
      <div class="card"><h2>GPU utilisation</h2><div data-part="gpu-chart"></div></div>
    </div>
    <div class="card"><h2>Logs <span class="state" data-part="logs-state"></span></h2>
      <pre class="logs" data-part="logs"></pre></div>
    <div class="grid">
      <div class="card"><h2>Timeline</h2><ol class="timeline" data-part="timeline"></ol></div>
      <div class="card"><h2>Spec</h2><pre class="spec" data-part="spec"></pre></div>
    </div>
  </section>`;
  const part = (name) => root.querySelector(`[data-part="${name}"]`);
  const error = root.querySelector('.error');

  let job = null;
  let history = [];

  const render = () => {
    part('status').innerHTML = status(job.status);
    part('action-buttons').innerHTML = actionsBar(job);
    part('overview').innerHTML = overview(job);
    part('progress').innerHTML = progressCard(job);
    const pending = pendingCard(job);
    part('pending').hidden = !pending;
    part('pending').innerHTML = pending ?? '';
    const cards = [
      ['dispute', disputeCard], ['verification', verificationCard], ['result', resultCard],
      ['charges', chargesCard], ['attempts', attemptsCard],
    ];
    for (const [name, card] of cards) {
      const shown = card(job);
      part(name).hidden = !shown;
      part(name).innerHTML = shown ?? '';
    }
    part('timeline').innerHTML = html`${job.timeline.map(timelineEntry)}`;
    const spec = jobSpec(job);
    part('spec').textContent = spec.json ? JSON.stringify(spec.json, null, 2) : spec.text;
    renderCharts();
  };
  const renderCharts = () => {
    const reports = history.filter((p) => p.attempt === job.attempts);
    part('charts').hidden = !reports.length;
    const at = (p) => p.elapsedSecs;
    part('progress-chart').innerHTML = lineChart({
      title: 'Progress',
      series: [{ label: 'progress', points: reports.map((p) => [at(p), p.progress == null ? null : p.progress * 100]) }],
      xFormat: duration, yFormat: (v) => `${Math.round(v)}%`, yMax: 100,
    });
    const lossNames = [...new Set(reports.flatMap((p) => Object.keys(p.metrics ?? {})))]
      .filter((name) => name.includes('loss'));
    part('loss-chart').innerHTML = lineChart({
      title: 'Loss',
      series: lossNames.map((name) => ({ label: name, points: reports.map((p) => [at(p), p.metrics?.[name] ?? null]) })),
      xFormat: duration, yFormat: (v) => +v.toPrecision(3),
    });
    part('gpu-chart').innerHTML = lineChart({
      title: 'GPU utilisation',
      series: [{ label: 'utilisation', points: reports.map((p) => [at(p), p.gpuUtilization]) }],
      xFormat: duration, yFormat: (v) => `${Math.round(v)}%`, yMax: 100,
    });
  };

  const loadJob = async () => {
    job = await getJson(`/v1/jobs/${id}`);
    error.hidden = true;
  };
  // A job event carries the row only: its timeline, pending and payout come from here.
  const reloadJob = coalesce(() => loadJob().then(render, showError));
  const showError = (e) => {
    error.textContent = e.status === 404 ? `There is no job ${id}.` : `Could not load job ${id}: ${e.message}`;
    error.hidden = false;
  };

  const stop = follow({
    types: ['job', 'progress'],
    async load() {
      const [detail, reports] = await Promise.all([
        getJson(`/v1/jobs/${id}`),
        getJson(`/v1/jobs/${id}/progress`).catch((e) => {
          console.warn('no progress history', e);
          return null;
        }),
      ]);
      job = detail;
      history = reports ?? (detail.progress ? [detail.progress] : []);
      error.hidden = true;
      render();
    },
    apply({ type, data }) {
      if (data.jobId !== id) return;
      // A job event carries the row only; it also brings a job this page opened before
      // the API had it (just posted from the submit page).
      if (type === 'job') {
        reloadJob();
        return;
      }
      if (!job) return;
      if (history.length && data.atMs <= history[history.length - 1].atMs) return;
      history.push(data);
      if (history.length > MAX_REPORTS) history.shift();
      job.progress = data;
      part('progress').innerHTML = progressCard(job);
      renderCharts();
    },
    failed: showError,
  });
  const stopLogs = followLogs(id, part('logs'), part('logs-state'));
  bindActions(part('actions'), () => job);
  // The submitter's buttons show once the wallet connects as the submitter.
  const stopWallet = wallet.on(() => {
    if (job) part('action-buttons').innerHTML = actionsBar(job);
  });
  return () => {
    stop();
    stopLogs();
    stopWallet();
  };
}

function overview(job) {
  const policy = job.policy;
  const waits = UNTIL[job.status];
  return html`<h2>Overview</h2><dl>
    <dt>Submitter</dt><dd><a href="#/accounts/${job.submitter.toLowerCase()}"><code title="${job.submitter}">${short(job.submitter)}</code></a></dd>
    <dt>Node</dt><dd>${job.nodeId == null ? none : html`<a href="#/nodes/${job.nodeId}">node ${job.nodeId}</a>${job.claimed ? html` <span class="muted">claimed</span>` : ''}`}</dd>
    <dt>Bounty</dt><dd>${money(job.bounty)}${big(job.fromCredits) ? html` <span class="muted">(${money(job.fromCredits)} of it from credits)</span>` : ''}</dd>
    <dt>Attempts</dt><dd>${job.attempts}${job.faults ? html`, <span class="err">${job.faults} faulted</span>` : ''}${policy ? html` <span class="muted">(fails after ${policy.maxAttempts} faults)</span>` : ''}</dd>
    <dt>Engine</dt><dd data-part="engine">${job.engine}</dd>
    <dt>Priority</dt><dd>${job.priority}</dd>
    <dt>Posted</dt><dd>${ago(job.postedAt)} <span class="muted">block ${job.postedBlock}</span></dd>
    ${job.assignedAt == null ? '' : html`<dt>Assigned</dt><dd>${ago(job.assignedAt)}</dd>`}
    ${waits && job.until != null ? html`<dt>${waits}</dt><dd data-part="until">${instant(job.until)}</dd>` : ''}
    <dt>Deadline</dt><dd>${instant(job.deadline)}</dd>
    <dt>Needs</dt><dd class="chips">${requirements(job.requirements).map((r) => html`<span class="chip">${r}</span>`)}</dd>
    <dt>Policy</dt><dd>${policy ? html`v${policy.version}: fee ${bps(policy.feeBps)}, challenge window ${duration(policy.challengeWindow)}, bond ≥ ${money(policy.disputeBond)}, arbiter ${duration(policy.disputePeriod)}, slash ${bps(policy.slashBps)}` : html`v${job.policyVersion} <span class="muted">not announced</span>`}</dd>
    <dt>Spec hash</dt><dd><code title="${job.specHash}">${short(job.specHash)}</code></dd>
    ${job.stateHash ? html`<dt>State hash</dt><dd><code title="${job.stateHash}">${short(job.stateHash)}</code> <span class="muted">as the market stores it</span></dd>` : ''}
  </dl>`;
}

/** An instant to come as a countdown, a past one as an age. */
const instant = (secs) => (secs > nowSecs() ? html`in ${until(secs)}` : html`passed ${ago(secs)}`);

/** Basis points as a percentage. */
const bps = (value) => `${+(Number(value) / 100).toFixed(2)}%`;

/** `JobRequirements` (an object, or JSON text from an older API; uints as numbers, decimal
 * or 0x strings) in words, as `gantry job status` says them. */
function requirements(value) {
  const r = jsonObject(value);
  if (!r) return [String(value ?? '')];
  const n = (v) => Number(big(v));
  const out = [gpus(r.minGpuCount, bytes32Text(r.gpuModel))];
  if (n(r.minVramMiB)) out.push(`≥ ${mib(n(r.minVramMiB))} VRAM per GPU`);
  if (n(r.minCpuCores)) out.push(`≥ ${n(r.minCpuCores)} CPU core${n(r.minCpuCores) === 1 ? '' : 's'}`);
  if (n(r.minRamMiB)) out.push(`≥ ${mib(n(r.minRamMiB))} RAM`);
  if (r.maxPricePerGpuHour != null) out.push(priceLimit(r.maxPricePerGpuHour));
  if (n(r.maxRuntime)) out.push(`runs ≤ ${duration(n(r.maxRuntime))}`);
  return out;
}

function progressCard(job) {
  const p = currentProgress(job);
  if (!p) {
    const why = {
      open: 'Waiting for a node.',
      assigned: 'Assigned; the worker has not reported progress yet.',
    }[job.status] ?? 'No progress was reported.';
    return html`<h2>Progress</h2><p class="muted">${why}</p>`;
  }
  const metrics = Object.entries(p.metrics ?? {});
  return html`<h2>Progress</h2>
    <div class="big-bar">${p.progress == null ? html`<span class="muted">no fraction reported</span>` : bar(p.progress, percent(p.progress, 1))}</div>
    <dl>
      ${p.epochs == null ? '' : html`<dt>Epoch</dt><dd>${p.epoch ?? 0} of ${p.epochs}</dd>`}
      <dt>Elapsed</dt><dd>${duration(p.elapsedSecs)}</dd>
      ${p.etaSecs == null ? '' : html`<dt>Remaining</dt><dd>~${until(p.atMs / 1000 + p.etaSecs)}</dd>`}
      ${metrics.map(([name, value]) => html`<dt>${name}</dt><dd>${typeof value === 'number' ? +value.toPrecision(4) : value}</dd>`)}
      ${p.gpuUtilization == null ? '' : html`<dt>GPU</dt><dd>${Math.round(p.gpuUtilization)}% busy${p.gpuMemoryUsedMib == null ? '' : html`, ${mib(p.gpuMemoryUsedMib)} memory`}</dd>`}
      <dt>Reported</dt><dd>${ago(p.atMs / 1000)} <span class="muted">by node ${p.nodeId}, attempt ${p.attempt}</span></dd>
    </dl>`;
}

/** The matcher's account of an open job: what rules the nodes out. */
function pendingCard(job) {
  if (job.status !== 'open') return null;
  const p = job.pending;
  if (!p) return html`<h2>Why pending</h2><p class="muted">The matcher has not looked at this job yet.</p>`;
  const rejected = Object.entries(p.rejected ?? {}).sort((a, b) => b[1] - a[1]);
  return html`<h2>Why pending</h2>
    <p class="summary">${p.summary}</p>
    <p class="muted small">${p.nodes} node${p.nodes === 1 ? '' : 's'} considered at block ${p.block}</p>
    ${rejected.length ? html`<ul class="reasons">${rejected.map(([constraint, count]) => html`<li>
      <span class="reason">${constraint}</span>${bar(p.nodes ? count / p.nodes : 0, `${count} of ${p.nodes}`)}</li>`)}</ul>` : ''}
    ${p.best?.length ? html`<table class="compact"><thead><tr><th>Closest node</th><th class="num">Score</th><th>Fails on</th></tr></thead><tbody>
      ${p.best.map((b) => html`<tr><td><a href="#/nodes/${b.nodeId}">node ${b.nodeId}</a></td>
        <td class="num">${typeof b.score === 'number' ? b.score.toFixed(2) : b.score}</td>
        <td class="wrap">${b.failed?.length ? b.failed.join(', ') : html`<span class="muted">nothing</span>`}</td></tr>`)}
    </tbody></table>` : ''}`;
}

/** A seat's end (`SeatRow.outcome`), in words. */
const SEAT = {
  seated: 'running', committed: 'committed', revealed: 'revealed', declined: 'gave it back',
  reclaimed: 'reclaimed: node inactive', paid: 'paid', unpaid: 'released, unpaid', slashed: 'slashed',
  parted: 'revealed another result: not paid, not slashed (Docker)',
};
/** The referees' decision (`RefereesRow.outcome`), in words. */
const REFEREES = {
  upheld: "upheld: the referees found the provider's result",
  overturned: 'overturned: the referees found another result',
  notRevealed: 'overturned: the provider never opened its sealed result',
  arbiter: 'no majority: the arbiter decides',
};

/** A verified job: its policy, each seat (who committed, revealed, agreed, how it ended), the digest a quorum agreed on, a refereed job's dispute. */
function verificationCard(job) {
  const v = job.verification;
  if (!v) return null;
  const policy = v.tier === 'replicated'
    ? `replicated ${v.size}/${v.quorum}: ${v.size} nodes of ${v.size} operators run it, ${v.quorum} equal results decide`
    : `refereed: a dispute is settled by ${v.size} referees re-running it`;
  const digest = (d) => (d ? html`<code title="${d}">${short(d)}</code>` : none);
  const r = v.referees;
  const rows = v.seatRows ?? [];
  return html`<h2>Verification</h2><dl>
    <dt>Policy</dt><dd data-part="policy">${policy}; reveal window ${duration(v.revealWindow)}; each seat locks ${money(v.seatStake)}</dd>
    ${v.verifiedDigest ? html`<dt>Verified</dt><dd data-part="verified">${v.agreed} seats agreed on ${digest(v.verifiedDigest)}</dd>` : ''}
    ${r ? html`<dt>Dispute</dt><dd data-part="referees">bond ${money(r.bond)}, referees prepaid ${money(r.prepay)}, commit by ${dateTime(r.commitEnd)};
      ${r.outcome ? (REFEREES[r.outcome] ?? r.outcome) : html`<span class="muted">open</span>`}${r.providerDigest ? html`; provider revealed ${digest(r.providerDigest)}` : ''}</dd>` : ''}
  </dl>
  ${rows.length ? html`<table class="compact" data-part="seats"><thead><tr><th>Seat</th><th>Node</th><th>Role</th>
    <th>Committed</th><th>Revealed</th><th>Digest</th><th>Outcome</th><th class="num">Paid / charged</th></tr></thead><tbody>
    ${rows.map((s) => html`<tr data-seat="${s.seat}" data-seat-node="${s.nodeId}" data-seat-outcome="${s.outcome}">
      <td>${s.seat}</td><td><a href="#/nodes/${s.nodeId}">node ${s.nodeId}</a></td><td>${s.role}</td>
      <td>${s.committedAt ? ago(s.committedAt) : none}</td><td>${s.revealedAt ? ago(s.revealedAt) : none}</td>
      <td>${digest(s.digest)}${s.digest && v.verifiedDigest ? (s.digest === v.verifiedDigest ? ' ✓' : ' ✗') : ''}</td>
      <td>${SEAT[s.outcome] ?? s.outcome}</td>
      <td class="num">${s.payout ? money(s.payout) : s.charged && big(s.charged) ? html`<span class="err">${money(s.charged)}</span>` : none}</td></tr>`)}
  </tbody></table>` : html`<p class="muted" data-part="seats">No seat drawn yet.</p>`}`;
}

/** The submitter's dispute: its bond, the node's stake held, the arbiter's deadline, the outcome. */
function disputeCard(job) {
  const d = job.dispute;
  if (!d) return null;
  const o = d.outcome;
  const row = (name, value) => (value == null ? '' : html`<dt>${name}</dt><dd>${value}</dd>`);
  return html`<h2>Dispute</h2><dl>
    <dt>Bond</dt><dd data-part="bond">${money(d.bond)} <span class="muted">posted by the submitter</span></dd>
    <dt>Exposure</dt><dd data-part="exposure">${money(d.exposure)} <span class="muted">of node ${job.nodeId}'s stake ${exposureFate(o)}</span></dd>
    <dt>Disputed</dt><dd>${ago(d.disputedAt)}</dd>
    <dt>Deadline</dt><dd>${o ? dateTime(d.deadline) : instant(d.deadline)}</dd>
    ${o ? html`<dt>Outcome</dt><dd data-part="outcome">${o.lapsed ? 'lapsed: the result stands' : o.providerWon ? 'decided for the provider' : 'decided for the submitter'} ${ago(o.at)}</dd>` : html`<dt>Outcome</dt><dd data-part="outcome" class="muted">open</dd>`}
    ${o && big(o.bondToSubmitter) ? row('Bond back to the submitter', money(o.bondToSubmitter)) : ''}
    ${o && big(o.bondToProvider) ? row('Bond to the provider', money(o.bondToProvider)) : ''}
    ${o ? row('By', html`<code title="${o.by}">${short(o.by)}</code>`) : ''}
  </dl>`;
}

/** What became of a dispute's exposure: held while open, slashed when lost, else released. */
function exposureFate(outcome) {
  if (!outcome) return 'held';
  if (!outcome.providerWon && !outcome.lapsed) return 'slashed, to the treasury';
  return 'held until the decision, then released';
}

function resultCard(job) {
  const completions = job.completions ?? [];
  const shown = [job.resultHash, job.resultUri, job.payout, job.refund, job.reason].some((v) => v != null)
    || completions.length;
  if (!shown) return null;
  const row = (name, value) => (value == null ? '' : html`<dt>${name}</dt><dd>${value}</dd>`);
  return html`<h2>Result and money</h2><dl>
    ${row('Result hash', job.resultHash && html`<code title="${job.resultHash}">${short(job.resultHash)}</code>`)}
    ${row('Result URI', job.resultUri && html`<code>${job.resultUri}</code>`)}
    ${row('Paid to provider', job.payout && money(job.payout))}
    ${row('Protocol fee', job.fee && money(job.fee))}
    ${row('Completed', job.completion && (COMPLETION[job.completion] ?? job.completion))}
    ${row('Refunded', job.refund && html`<span data-part="refund">${money(job.refund)}</span> <span class="muted">to the submitter's credits:</span>
      <span data-part="refund-sentence">${refundSentence(job)}</span>`)}
    ${row('Failed', job.failure && (FAILURE[job.failure] ?? job.failure))}
    ${row(SETTLED.has(job.status) ? 'Last attempt' : 'Previous attempt', job.reason)}
  </dl>
  ${completions.length ? html`<table class="compact" data-part="reports"><thead><tr><th>Attempt</th><th>Node</th><th>Worker report</th>
    <th class="num">Compute</th><th class="num">GPU time</th><th class="num">Avg GPU</th><th class="num">Output</th></tr></thead><tbody>
    ${completions.map((c) => html`<tr class="${c.error ? 'reported' : ''}"><td>${c.attempt}</td><td><a href="#/nodes/${c.nodeId}">node ${c.nodeId}</a></td>
      <td>${REPORT[c.status] ?? c.status}</td>
      <td class="num">${duration(c.computeSecs)}</td><td class="num">${duration(c.gpuSecs)}</td>
      <td class="num">${c.avgGpuUtilization == null ? none : `${Math.round(c.avgGpuUtilization)}%`}</td>
      <td class="num">${c.outputBytes == null ? none : bytes(c.outputBytes)}</td></tr>
      ${c.error ? html`<tr class="report"><td colspan="7"><div class="report err" data-part="report">${c.error}</div></td></tr>` : ''}`)}
  </tbody></table>` : ''}`;
}

/** What a node's loss of stake on a job was, by the cause of its charge (`ChargeRow.cause`). */
const LOSS = {
  reject: 'charge for giving the job back',
  nodeInactive: 'charge for going inactive with the job',
  runtimeExceeded: 'charge for running past its runtime',
  disputeLost: 'dispute exposure, for losing the dispute',
};

/**
 * What the refund is and what it is not, as `gantry job status` says it: what the
 * submitter got back (the bounty, all of it or the unpaid seats'; a lost dispute's bond; the
 * referees' bond and prepay not paid out; a provider's repayment of the referees) and what
 * each node lost of its stake on the job (a reject's or a reclaim's charge, a lost dispute's
 * exposure, a seat's stake), which went to the treasury, not to the submitter.
 */
function refundSentence(job) {
  const back = returned(job);
  const losses = nodeLosses(job);
  if (!losses.length) return `${back}; no node was slashed on it`;
  const total = losses.reduce((sum, l) => sum + l.amount, 0n);
  const last = losses.length - 1;
  // One node's loss is the total; each of several says its own.
  const each = losses.map((l, i) => `${i === 0 ? '' : i === last ? ' and ' : ', '}node ${l.nodeId}'s ${last ? `${money(l.amount)} ` : ''}${l.what}`);
  const treasuries = [...new Set((job.attemptRows ?? []).map((a) => a.slashedTo).filter(Boolean))];
  // A replicated job's nodes lose only their seats' stakes.
  const slashes = job.verification?.tier === 'replicated' ? "the slashed seats' stakes" : "the nodes' slashes";
  return html`${back}; ${slashes} (${money(total)}: ${each.join('')}) went to the treasury${treasuries.map((t, i) => html`${i ? ' and' : ''} <code title="${t}">${short(t)}</code>`)}, not to the submitter`;
}

/** What the submitter got back of the job's money: the refund and what came with it. */
function returned(job) {
  const v = job.verification;
  let what;
  if (v?.tier === 'replicated') {
    const unpaid = Number(big(job.refund) / (big(job.bounty) || 1n));
    const parted = (v.seatRows ?? []).filter((s) => s.outcome === 'parted').length;
    what = `the bounty of the ${unpaid} seat${unpaid === 1 ? '' : 's'} not paid, of ${money(v.escrow)} escrowed`;
    if (parted) what += ` (the bounty of the ${parted} seat${parted === 1 ? '' : 's'} that revealed another result went to the treasury)`;
  } else {
    what = big(job.refund) === big(job.bounty) ? 'the whole bounty' : `of the bounty of ${money(job.bounty)}`;
  }
  const extras = [];
  const bond = big(job.dispute?.outcome?.bondToSubmitter);
  if (bond) extras.push([bond, `the dispute bond (${money(bond)})`]);
  const referees = big(v?.referees?.toSubmitter);
  if (referees) extras.push([referees, `${money(referees)} of the referees' bond and prepay`]);
  for (const e of (job.timeline ?? []).filter((t) => t.name === 'HoldForfeited')) {
    const amount = big(e.data?.amount);
    if (amount) extras.push([amount, `${money(amount)} of node ${big(e.data.nodeId)}'s stake, repaying the referees`]);
  }
  if (!extras.length) return what;
  const all = extras.reduce((sum, [amount]) => sum + amount, big(job.refund));
  const items = [what, ...extras.map(([, words]) => words)];
  const last = items.pop();
  return `${items.join(', ')} and ${last}: ${money(all)} in all`;
}

/**
 * What each node lost of its stake on the job, to the treasury: its charges (a reject, a
 * reclaim, a lost dispute's exposure: every slash not at a verified job's decision, a
 * freed seat's too) and the seats slashed at the decision. Nothing twice: a slash is a
 * charge or a decided seat's, not both.
 */
function nodeLosses(job) {
  const losses = (job.charges ?? [])
    .filter((c) => big(c.amount) > 0n)
    .map((c) => ({ nodeId: c.nodeId, amount: big(c.amount), what: LOSS[c.cause] ?? `charge (${c.cause})` }));
  for (const s of job.verification?.seatRows ?? []) {
    if (s.outcome === 'slashed' && big(s.charged) > 0n) {
      losses.push({ nodeId: s.nodeId, amount: big(s.charged), what: `${s.role} seat stake` });
    }
  }
  return losses;
}

/** Each attempt: its node, how it ended, whose fault and why, what its node's stake lost and to whom. */
function attemptsCard(job) {
  const attempts = job.attemptRows ?? [];
  if (!attempts.length) return null;
  return html`<h2>Attempts</h2>
    <table class="compact"><thead><tr><th>#</th><th>Node</th><th>Outcome</th><th>Fault</th><th>Why</th>
      <th class="num">Slashed</th><th>To</th><th>Assigned</th><th>Ended</th></tr></thead><tbody>
    ${attempts.map((a) => html`<tr data-attempt="${a.attempt}" data-outcome="${a.outcome}" data-fault="${a.fault}">
      <td>${a.attempt}</td>
      <td><a href="#/nodes/${a.nodeId}">node ${a.nodeId}</a>${a.claimed ? html` <span class="muted">claimed</span>` : ''}</td>
      <td>${OUTCOME[a.outcome] ?? a.outcome}</td>
      <td>${FAULT[a.fault] ? html`<span class="${a.fault === 'node' ? 'err' : ''}">${FAULT[a.fault]}</span>` : none}</td>
      <td class="wrap">${a.reason ?? none}</td>
      <td class="num">${big(a.slashed) ? money(a.slashed) : none}</td>
      <td>${a.slashedTo ? html`treasury <code title="${a.slashedTo}">${short(a.slashedTo)}</code>` : none}</td>
      <td>${ago(a.assignedAt)}</td>
      <td>${a.endedAt == null ? none : ago(a.endedAt)}</td></tr>`)}
    </tbody></table>`;
}

/** The nodes barred from the job and what each was charged (to the treasury). */
function chargesCard(job) {
  const charges = job.charges ?? [];
  const barred = job.barredNodes ?? [];
  if (!charges.length && !barred.length) return null;
  return html`<h2>Barred and charged</h2>
    ${barred.length ? html`<p class="small">Barred: ${barred.map((n, i) => html`${i ? ', ' : ''}<a href="#/nodes/${n}">node ${n}</a>`)}</p>` : ''}
    <table class="compact"><thead><tr><th>Node</th><th>Why</th><th class="num">Charged</th><th>When</th></tr></thead><tbody>
    ${charges.map((c) => html`<tr data-charge-node="${c.nodeId}"><td><a href="#/nodes/${c.nodeId}">node ${c.nodeId}</a></td>
      <td class="wrap">${CHARGE[c.cause] ?? c.cause}</td><td class="num">${money(c.amount)}</td><td>${ago(c.at)}</td></tr>`)}
    </tbody></table>`;
}

function timelineEntry(entry) {
  const fields = Object.entries(entry.data ?? {})
    .filter(([name, value]) => !HIDDEN_FIELDS.has(name) && (typeof value !== 'object' || value === null))
    .map(([name, value]) => html`<span class="field" data-field="${name}">${name} <b>${eventField(name, value, entry.name)}</b></span>`);
  return html`<li><span class="event">${entry.name}</span> ${ago(entry.at)}
    <span class="muted small">block ${entry.block} · tx <code title="${entry.tx}">${short(entry.tx)}</code></span>
    ${fields.length ? html`<div class="fields">${fields}</div>` : ''}</li>`;
}

/**
 * An event's field in words (alloy's serde of the event: uint40 to uint256 come as 0x
 * hex): amounts in the token, instants as dates, enums by name, a draw's seats by node,
 * node ids as links, numbers in decimal; only hashes and addresses stay hex, shortened.
 */
export function eventField(name, value, event) {
  if (AMOUNT_FIELDS.has(name)) return money(value);
  if (name.endsWith('At') || TIME_FIELDS.has(name)) return dateTime(Number(big(value)));
  const words = ENUMS[event]?.[name];
  if (words) return words[Number(big(value))] ?? `unknown (${big(value)})`;
  if (name === 'seats') return seatsWord(value);
  if (name === 'nodeId') return html`<a href="#/nodes/${big(value)}">node ${big(value)}</a>`;
  if (name === 'drawBlock') return `block ${big(value)}`;
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (typeof value === 'string' && /^0x[0-9a-f]*$/i.test(value)) {
    // A uint up to 64 bits (uint40 times and blocks, counts) reads as its number; a word
    // (hash, address, digest) as the hex it is.
    if (value.length <= 18) return String(big(value));
    return html`<code title="${value}">${short(value)}</code>`;
  }
  return String(value);
}

/** `Drawn.seats` (seat i's node id at bits [48i, 48i + 47]) as `seat 0: node 4, …`. */
function seatsWord(value) {
  const word = big(value);
  const mask = (1n << SEAT_BITS) - 1n;
  const seats = [];
  for (let i = 0n; i * SEAT_BITS < 256n; i += 1n) {
    const node = (word >> (i * SEAT_BITS)) & mask;
    if (node) seats.push(`seat ${i}: node ${node}`);
  }
  return seats.length ? seats.join(', ') : 'none';
}

/**
 * Streams the job's log into `box`: `/logs?follow=true` sends the tail, then each new line
 * until the job settles (`end`); a reconnecting EventSource resumes after the last line
 * it got (`Last-Event-ID`). Returns the closer.
 */
function followLogs(id, box, state) {
  let source = null;
  const atBottom = () => box.scrollHeight - box.scrollTop - box.clientHeight < 24;
  const append = (line) => {
    const stick = atBottom();
    const span = document.createElement('span');
    span.className = `log ${line.stream}`;
    span.textContent = `${new Date(line.atMs).toLocaleTimeString('en-GB')}  ${line.line}\n`;
    box.append(span);
    while (box.childElementCount > MAX_LOG_LINES) box.firstElementChild.remove();
    if (stick) box.scrollTop = box.scrollHeight;
  };
  const fallback = async () => {
    state.textContent = 'not live';
    try {
      box.textContent = '';
      (await getJson(`/v1/jobs/${id}/logs?tail=200`)).forEach(append);
    } catch (e) {
      state.textContent = `unavailable: ${e.message}`;
    }
  };
  const open = () => {
    box.textContent = '';
    source = new EventSource(`/v1/jobs/${id}/logs?follow=true`);
    source.addEventListener('open', () => { state.textContent = 'live'; });
    source.addEventListener('log', (event) => {
      try {
        append(JSON.parse(event.data));
      } catch {
        console.warn('unreadable log line', event.data);
      }
    });
    source.addEventListener('end', () => {
      source.close();
      state.textContent = 'job finished';
    });
    // Lines were dropped for this client: start again from the tail.
    source.addEventListener('lagged', () => {
      source.close();
      open();
    });
    source.addEventListener('error', () => {
      if (source.readyState === EventSource.CLOSED) fallback();
      else state.textContent = 'reconnecting…';
    });
  };
  open();
  return () => source.close();
}
