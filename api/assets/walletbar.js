// The wallet in the header: a connect button (a choice when several wallets announce
// themselves), then the account, its token balance and market credits, and the network;
// a clear word when the wallet is on another chain or there is none.

import { html, money, short } from './format.js';
import { networkInfo, readyMessage, reason, wallet, wallets } from './wallet.js';

let shown = 0;

/** Renders the wallet into `el` now and on every change. */
export function mountWalletBar(el) {
  const render = async () => {
    const turn = ++shown;
    const status = wallet.status();
    const network = await networkInfo().catch(() => null);
    let body;
    if (status === 'absent') {
      body = html`<span class="muted" data-wallet="absent" title="${readyMessage()}">No wallet found</span>`;
    } else if (status === 'disconnected') {
      body = html`${wallets().map((w) => html`<button type="button" data-connect="${w.info.uuid}">Connect ${wallets().length > 1 ? w.info.name : 'wallet'}</button>`)}`;
    } else if (status === 'wrong-chain') {
      body = html`<span class="warn" data-wallet="wrong-chain">${short(wallet.account)} is on chain ${wallet.chainId}; Gantry is on ${network?.chainId}</span>
        <button type="button" data-switch>Switch network</button>`;
    } else {
      let money_ = '';
      try {
        const { balance, credits } = await wallet.balances();
        money_ = html` · <span data-part="balance">${money(balance)}</span> · credits <span data-part="credits">${money(credits)}</span>`;
      } catch (error) {
        money_ = html` · <span class="warn">${reason(error)}</span>`;
      }
      body = html`<a href="#/accounts/${wallet.account.toLowerCase()}" data-wallet="ready" data-account="${wallet.account}" title="${wallet.name} on chain ${wallet.chainId}">${short(wallet.account)}</a>${money_}`;
    }
    if (turn !== shown) return;
    el.innerHTML = body;
  };
  el.addEventListener('click', async (event) => {
    const connect = event.target.closest('[data-connect]');
    const switching = event.target.closest('[data-switch]');
    try {
      if (connect) await wallet.connect(connect.dataset.connect);
      if (switching) await wallet.switchChain();
    } catch (error) {
      el.insertAdjacentHTML('beforeend', html` <span class="warn">${reason(error)}</span>`.text);
    }
  });
  wallet.on(render);
  window.addEventListener('eip6963:announceProvider', () => setTimeout(render));
  render();
  return render;
}
