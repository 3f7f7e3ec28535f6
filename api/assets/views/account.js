// `#/accounts/<address>`: a submitter's side of the market — its credits (what it can post
// from and withdraw) and every flow in and out of them (deposits, bounties escrowed,
// refunds, dispute bonds, withdrawals), and the jobs it posted.

import { coalesce, follow, getJson } from '../api.js';
import { big, html, money, short } from '../format.js';
import { JOB_HEAD, jobRow, rowsOpenJobs } from './jobs.js';

const PAGE = 50;

export function mount(root, address) {
  document.title = `Account ${short(address)} · Gantry`;
  root.innerHTML = html`<section>
    <header class="page"><a class="back" href="#/jobs">← Jobs</a>
      <h1>Account <code title="${address}">${short(address)}</code></h1></header>
    <p class="error" hidden></p>
    <div class="card" data-part="credits"><p class="muted">Loading…</p></div>
    <div class="card flush"><h2>Jobs posted</h2><table class="jobs"><thead>${JOB_HEAD}</thead><tbody></tbody></table></div>
  </section>`;
  const part = (name) => root.querySelector(`[data-part="${name}"]`);
  const error = root.querySelector('.error');
  const tbody = root.querySelector('tbody');
  rowsOpenJobs(tbody);

  const render = (account, jobs) => {
    part('credits').innerHTML = account
      ? html`<h2>Credits</h2><dl class="columns">
        <dt>Credits</dt><dd data-part="balance"><b>${money(account.credits)}</b> <span class="muted">to post from or withdraw</span></dd>
        <dt>Jobs posted</dt><dd>${account.jobsPosted}</dd>
        <dt>Deposited</dt><dd data-part="deposited">${money(account.deposited)}</dd>
        <dt>Withdrawn</dt><dd>${money(account.withdrawn)}</dd>
        <dt>Bounties</dt><dd>${money(account.bounties)}${big(account.fromCredits) ? html` <span class="muted">(${money(account.fromCredits)} of them from credits)</span>` : ''}</dd>
        <dt>Refunded</dt><dd data-part="refunded">${money(account.refunded)} <span class="muted" title="Bounties of failed, cancelled and expired jobs and of a verified job's unpaid seats, and the referees' pay a provider whose result was overturned repaid">bounties credited back; nodes' slashes go to the treasury, not here</span></dd>
        <dt title="A refereed dispute's bond counts its referees' prepay; returned: the bond of a dispute the submitter won, the prepay not paid out">Dispute bonds</dt><dd data-part="bonds">${money(account.bondsPosted)} posted <span class="muted">${money(account.bondsReturned)} returned</span></dd>
      </dl>`
      : html`<p class="muted">No deposit, job or refund of this account yet.</p>`;
    tbody.innerHTML = jobs.length
      ? html`${jobs.map((job) => jobRow(job))}`
      : html`<tr class="none"><td colspan="8">No jobs</td></tr>`;
  };
  const load = async () => {
    const [account, jobs] = await Promise.all([
      getJson(`/v1/accounts/${address}`).catch((e) => {
        if (e.status === 404) return null;
        throw e;
      }),
      getJson(`/v1/jobs?submitter=${address}&limit=${PAGE}`),
    ]);
    error.hidden = true;
    render(account, jobs.items);
  };
  const failed = (e) => {
    error.textContent = `Could not load account ${address}: ${e.message}`;
    error.hidden = false;
  };
  const reload = coalesce(() => load().catch(failed));
  // Deposits and withdrawals change no job: every block may move the credits.
  return follow({ types: ['job', 'block'], load, apply: reload, failed });
}
