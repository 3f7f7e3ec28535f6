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

/** The last result offered for saving (its memory is given back on the next). */
let offered = null;

/** The ciphertext hash an encrypted job's result URI names (as
 * `gantry_protocol::encryption::split_ciphertext` reads it: 64 hex digits after the first
 * `#ciphertext-sha256=`); null for a job in the clear, whatever its URI says. */
function ciphertextHash(job) {
  if (!job.spec?.encryption) return null;
  const at = job.resultUri.indexOf('#ciphertext-sha256=');
  const hex = at < 0 ? '' : job.resultUri.slice(at + '#ciphertext-sha256='.length);
  return /^[0-9a-fA-F]{64}$/.test(hex) ? `0x${hex.toLowerCase()}` : null;
}

/** Fetches the stored result through the API (at most MAX_CHECKED_BYTES, counted as they
 * come), hashes it (SHA-256, WebCrypto) and compares: a job in the clear against the
 * chain's resultHash; an encrypted job's ciphertext against the hash its node named in
 * the URI (the chain's is the plaintext's, which only decrypting checks). The checked
 * bytes become a download link. */
async function download(job) {
  const response = await fetch(`/v1/jobs/${job.jobId}/result`);
  if (!response.ok) {
    let message = `${response.status}`;
    try { message = (await response.json()).error ?? message; } catch { /* not JSON */ }
    throw new Error(message);
  }
  const reader = response.body.getReader();
  const chunks = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_CHECKED_BYTES) {
      await reader.cancel();
      throw new Error(`the result is over ${MAX_CHECKED_BYTES} bytes: check it with \`gantry job result ${job.jobId}\``);
    }
    chunks.push(value);
  }
  const blob = new Blob(chunks, { type: 'application/octet-stream' });
  const digest = await crypto.subtle.digest('SHA-256', await blob.arrayBuffer());
  const hex = `0x${[...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
  const cipher = ciphertextHash(job);
  const encrypted = Boolean(job.spec?.encryption);
  const expected = encrypted ? cipher : job.resultHash.toLowerCase();
  const status = document.createElement('span');
  if (hex !== expected) {
    status.dataset.resultCheck = 'mismatch';
    status.className = 'warn';
    status.textContent = encrypted && !cipher
      ? 'the result URI names no ciphertext hash: check it with `gantry job result`'
      : `the downloaded result hashes to ${hex}, not ${expected}: do not trust it`;
    return [status];
  }
  status.dataset.resultCheck = encrypted ? 'ciphertext' : 'ok';
  status.textContent = encrypted
    ? `${total} bytes of ciphertext, as the node's result URI names them (sha256 ${hex}); the chain's hash is the plaintext's: decrypt and check it with \`gantry job result ${job.jobId}\` `
    : `checked: ${total} bytes whose sha256 ${hex} is the result hash on chain (what the node committed to) `;
  if (offered) URL.revokeObjectURL(offered);
  offered = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = offered;
  link.download = `job-${job.jobId}-result${encrypted ? '.age' : '.tar'}`;
  link.textContent = 'save';
  link.dataset.part = 'result-file';
  return [status, link];
}
