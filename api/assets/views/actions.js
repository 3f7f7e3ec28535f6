// A job's buttons, on its page: the submitter's cancel (open), accept and dispute (a
// result within its challenge window), each sent by the wallet with the job's terms and
// state as the API folds them (the market checks them against the hash it stores); and
// for anyone, the result downloaded and checked against the chain's hash in the browser.

import { big, html, money, nowSecs } from '../format.js';
import { reason, wallet } from '../wallet.js';

/** The largest result checked in the browser (it is hashed in memory). */
const MAX_CHECKED_BYTES = 512 * 1024 * 1024;

/** The job's buttons, as its status and the wallet allow. */
export function actionsBar(job) {
  const mine = wallet.status() === 'ready' && wallet.account.toLowerCase() === job.submitter.toLowerCase();
  const buttons = [];
  if (mine && job.state && job.status === 'open') {
    buttons.push(html`<button type="button" data-job-action="cancel">Cancel and refund ${money(job.bounty)}</button>`);
  }
  if (mine && job.state && job.status === 'submitted' && (job.until ?? 0) > nowSecs()) {
    buttons.push(html`<button type="button" data-job-action="accept">Accept the result</button>`);
    buttons.push(html`<button type="button" data-job-action="dispute">Dispute (bond ${money(bond(job))})</button>`);
  }
  // A refereed job's resultHash seals its digest: not a hash of the bytes.
  if (job.resultUri && job.resultHash && job.verification?.tier !== 'refereed') {
    buttons.push(html`<button type="button" data-job-action="download">Download and check the result</button>`);
  }
  return html`${buttons}`;
}

/** The bond a dispute takes: the larger of the policy's and a tenth of the bounty. */
function bond(job) {
  const share = (big(job.bounty) * 1000n) / 10000n;
  const least = big(job.policy?.disputeBond);
  return share > least ? share : least;
}

/** Handles the buttons in `el`; `current()` gives the job as now shown. */
export function bindActions(el, current) {
  el.addEventListener('click', async (event) => {
    const button = event.target.closest('[data-job-action]');
    if (!button) return;
    const note = el.querySelector('[data-part="action-note"]');
    const job = current();
    button.disabled = true;
    note.textContent = '';
    try {
      const action = button.dataset.jobAction;
      if (action === 'download') {
        note.replaceChildren(...(await download(job)));
      } else {
        note.textContent = 'confirm in your wallet…';
        await send(action, job);
        note.textContent = { cancel: 'cancelled: the bounty is back in your credits', accept: 'accepted: the node is paid', dispute: 'disputed: the arbiter decides' }[action];
      }
    } catch (error) {
      note.textContent = reason(error);
    } finally {
      button.disabled = false;
    }
  });
}

async function send(action, job) {
  const { market, token } = await wallet.contracts();
  const terms = job.terms;
  const state = job.state;
  if (action === 'dispute') {
    const needed = bond(job);
    if ((await token.allowance(wallet.account, market.target)) < needed) {
      await wallet.confirm(token.approve(market.target, needed));
    }
  }
  await wallet.confirm(market[action](job.jobId, terms, state));
  wallet.refresh();
}

/** Fetches the stored result through the API, hashes it (SHA-256, WebCrypto) and compares
 * it with the chain's hash (an encrypted result: with the ciphertext's, named in the URI);
 * the checked bytes become a download link. */
async function download(job) {
  const response = await fetch(`/v1/jobs/${job.jobId}/result`);
  if (!response.ok) {
    let message = `${response.status}`;
    try { message = (await response.json()).error ?? message; } catch { /* not JSON */ }
    throw new Error(message);
  }
  const length = Number(response.headers.get('content-length') ?? 0);
  if (length > MAX_CHECKED_BYTES) throw new Error(`the result is ${length} bytes: check it with \`gantry job result ${job.jobId}\``);
  const bytes = await response.arrayBuffer();
  const digest = await crypto.subtle.digest('SHA-256', bytes);
  const hex = `0x${[...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
  const cipher = /#ciphertext-sha256=(?:0x)?([0-9a-fA-F]{64})/.exec(job.resultUri)?.[1];
  const expected = cipher ? `0x${cipher.toLowerCase()}` : job.resultHash.toLowerCase();
  const status = document.createElement('span');
  status.dataset.resultCheck = hex === expected ? 'ok' : 'mismatch';
  if (hex !== expected) {
    status.className = 'warn';
    status.textContent = `the downloaded result hashes to ${hex}, not ${expected}: do not trust it`;
    return [status];
  }
  status.textContent = cipher
    ? `ciphertext checked (${bytes.byteLength} bytes, sha256 ${hex}); decrypt it with \`gantry job result ${job.jobId}\` `
    : `checked: ${bytes.byteLength} bytes, sha256 ${hex} as on chain `;
  const link = document.createElement('a');
  link.href = URL.createObjectURL(new Blob([bytes], { type: 'application/octet-stream' }));
  link.download = `job-${job.jobId}-result${cipher ? '.age' : '.tar'}`;
  link.textContent = 'save';
  link.dataset.part = 'result-file';
  return [status, link];
}
