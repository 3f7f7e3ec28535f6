// The dashboard: hash routes to views, the live-feed indicator and the clock that keeps
// relative times current. Each view's `mount(root, …)` returns its cleanup.

import { getJson, live } from './api.js';
import { html, tick, useToken } from './format.js';
import * as jobs from './views/jobs.js';
import * as job from './views/job.js';
import * as nodes from './views/nodes.js';
import * as network from './views/network.js';
import * as account from './views/account.js';
import * as submit from './views/submit.js';
import * as operate from './views/operate.js';
import { mountWalletBar } from './walletbar.js';

const view = document.getElementById('view');

const ROUTES = [
  { path: /^\/jobs$/, nav: 'jobs', mount: (_, query) => jobs.mount(view, query) },
  { path: /^\/jobs\/(\d+)$/, nav: 'jobs', mount: ([, id]) => job.mount(view, Number(id)) },
  { path: /^\/nodes$/, nav: 'nodes', mount: () => nodes.mount(view) },
  { path: /^\/nodes\/(\d+)$/, nav: 'nodes', mount: ([, id]) => nodes.mountOne(view, Number(id)) },
  { path: /^\/network$/, nav: 'network', mount: () => network.mount(view) },
  { path: /^\/submit$/, nav: 'submit', mount: () => submit.mount(view) },
  { path: /^\/operate$/, nav: 'operate', mount: () => operate.mount(view) },
  { path: /^\/accounts\/(0x[0-9a-fA-F]{40})$/, nav: 'jobs', mount: ([, address]) => account.mount(view, address.toLowerCase()) },
];

let unmount = () => {};

function route() {
  const [path, search = ''] = (location.hash.slice(1) || '/jobs').split('?');
  const found = ROUTES.map((r) => ({ r, match: path.match(r.path) })).find(({ match }) => match);
  unmount();
  unmount = () => {};
  for (const link of document.querySelectorAll('[data-nav]')) {
    link.classList.toggle('active', link.dataset.nav === found?.r.nav);
  }
  if (!found) {
    view.innerHTML = html`<section class="empty"><h1>Not found</h1><p>No page at <code>#${path}</code>. <a href="#/jobs">Jobs</a></p></section>`;
    return;
  }
  window.scrollTo(0, 0);
  unmount = found.r.mount(found.match, new URLSearchParams(search)) ?? (() => {});
}

function showLive() {
  const el = document.getElementById('live');
  el.dataset.state = live.state;
  const text = {
    connecting: 'connecting…',
    live: live.block ? `live · block ${live.block.number}` : 'live',
    offline: 'offline',
  }[live.state];
  el.querySelector('.text').textContent = text;
}

mountWalletBar(document.getElementById('wallet'));
live.on('state', showLive);
live.on('block', showLive);
live.start();
window.addEventListener('hashchange', route);
// Amounts need the token's decimals; without an answer they show as the dev token's.
getJson('/v1/token')
  .then(useToken, (error) => console.warn('the token is unknown', error))
  .finally(route);
setInterval(() => tick(view), 1000);
