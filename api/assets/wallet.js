// The user's wallet, for the pages that send transactions (submit a job, run a node, a
// job's buttons). The API stays read-only: every write goes from the wallet to the chain.
//
// Wallets are found by EIP-6963 (each injected wallet announces itself; there may be
// several), else the older `window.ethereum` (EIP-1193). The chain and the contracts come
// from `GET /v1/network`, their ABIs from `/assets/abi/`, and ethers (embedded, loaded only
// once a wallet connects) encodes the calls, asks the wallet to sign typed data and reads
// the receipts. Nothing here holds a key: the wallet signs.

import { getJson } from './api.js';

const REMEMBERED = 'gantry.wallet';
const announced = new Map();
const listeners = new Set();
/** The providers whose account and chain changes are followed. */
const heard = new WeakSet();
let ethersModule = null;
let network = null;
let abis = null;

/** ethers, loaded on first use (the read-only pages never need it). */
export async function ethers() {
  ethersModule ??= await import('./vendor/ethers.min.js');
  return ethersModule;
}

/** The chain and contracts the API projects (`GET /v1/network`). */
export async function networkInfo() {
  network ??= await getJson('/v1/network');
  return network;
}

async function contractAbis() {
  abis ??= Object.fromEntries(await Promise.all(['JobMarket', 'NodeRegistry', 'GantryTestToken'].map(
    async (name) => [name, (await getJson(`/assets/abi/${name}.json`)).abi],
  )));
  return abis;
}


/** The wallets on offer: those that announced themselves, else `window.ethereum`. */
export function wallets() {
  if (announced.size) return [...announced.values()];
  if (typeof window.ethereum?.request === 'function') {
    return [{ info: { uuid: 'injected', name: 'Browser wallet', icon: '' }, provider: window.ethereum }];
  }
  return [];
}

function emit() {
  for (const fn of listeners) fn(wallet);
}

/** Every error the contracts declare (the market's calls reach the token too). */
let contractErrors = null;

/** Why a transaction or call failed, in words: the contract's error by name when it
 * reverted with one, the wallet's refusal, or the message. */
export function reason(error) {
  let revert = error?.revert ?? error?.error?.revert;
  const data = error?.data ?? error?.error?.data ?? error?.info?.error?.data;
  if (!revert?.name && contractErrors && typeof data === 'string' && data.length >= 10) {
    try {
      revert = contractErrors.parseError(data);
    } catch {
      // Not one of ours.
    }
  }
  if (revert?.name) {
    const args = (revert.args ?? []).map((a) => String(a)).join(', ');
    return `the contract refused: ${revert.name}(${args})`;
  }
  if (error?.code === 'ACTION_REJECTED' || error?.code === 4001) return 'you declined it in your wallet';
  return error?.shortMessage ?? error?.reason ?? error?.message ?? String(error);
}

export const wallet = {
  /** The connected EIP-1193 provider; none until `connect`. */
  provider: null,
  /** The wallet's name, as it announced itself. */
  name: '',
  /** The connected account (checksummed), its chain id (number). */
  account: null,
  chainId: null,

  /** Calls `fn(wallet)` on every change; returns the unsubscriber. */
  on(fn) {
    listeners.add(fn);
    return () => listeners.delete(fn);
  },

  /** `absent` (no wallet in this browser), `disconnected`, `wrong-chain` or `ready`. */
  status() {
    if (!this.provider) return wallets().length ? 'disconnected' : 'absent';
    if (!this.account) return 'disconnected';
    if (network && this.chainId !== network.chainId) return 'wrong-chain';
    return 'ready';
  },

  /** Connects the wallet `uuid` (the first on offer when none): asks for the account
   * unless `ask` is false (then only an account already granted). */
  async connect(uuid, { ask = true } = {}) {
    const found = wallets().find((w) => !uuid || w.info.uuid === uuid);
    if (!found) throw new Error('no wallet in this browser');
    await networkInfo();
    const { provider, info } = found;
    const accounts = await provider.request({ method: ask ? 'eth_requestAccounts' : 'eth_accounts' });
    if (!accounts?.length) return;
    const { getAddress } = await ethers();
    this.provider = provider;
    this.name = info.name;
    this.account = getAddress(accounts[0]);
    this.chainId = Number(await provider.request({ method: 'eth_chainId' }));
    localStorage.setItem(REMEMBERED, info.uuid);
    if (!heard.has(provider)) {
      heard.add(provider);
      provider.on?.('accountsChanged', (next) => {
        if (this.provider !== provider) return;
        this.account = next?.length ? getAddress(next[0]) : null;
        emit();
      });
      provider.on?.('chainChanged', (id) => {
        if (this.provider !== provider) return;
        this.chainId = Number(id);
        emit();
      });
    }
    emit();
  },

  /** Tells every view the wallet's money may have changed (after a transaction). */
  refresh() {
    emit();
  },

  disconnect() {
    this.provider = null;
    this.account = null;
    localStorage.removeItem(REMEMBERED);
    emit();
  },

  /** Asks the wallet to switch to Gantry's chain (adding it when the wallet does not know
   * it and the API names a public RPC). */
  async switchChain() {
    const { chainId, rpcUrl } = await networkInfo();
    const hex = `0x${chainId.toString(16)}`;
    try {
      await this.provider.request({ method: 'wallet_switchEthereumChain', params: [{ chainId: hex }] });
    } catch (error) {
      if (error?.code !== 4902 || !rpcUrl) throw error;
      await this.provider.request({
        method: 'wallet_addEthereumChain',
        params: [{ chainId: hex, chainName: `Gantry ${chainId}`, rpcUrls: [rpcUrl],
          nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 } }],
      });
    }
    this.chainId = Number(await this.provider.request({ method: 'eth_chainId' }));
    emit();
  },

  /** The signer and the contracts, for a transaction; refuses unless `ready`. */
  async contracts() {
    const status = this.status();
    if (status !== 'ready') throw new Error(READY_MESSAGE[status]);
    const e = await ethers();
    const { market, token } = await networkInfo();
    if (!market || !token) throw new Error('this API does not name its contracts (gantry-api --market, --token)');
    const abi = await contractAbis();
    contractErrors ??= new e.Interface([...new Map(Object.values(abi).flat().filter((f) => f.type === 'error')
      .map((f) => [`${f.name}(${f.inputs.map((i) => i.type)})`, f])).values()]);
    const signer = await new e.BrowserProvider(this.provider, network.chainId).getSigner(this.account);
    const marketContract = new e.Contract(market, abi.JobMarket, signer);
    // The token is the market's own (what it pulls bounties and stakes in), not only what
    // the API says: a permit or an approval names it.
    const marketToken = await marketContract.token();
    if (marketToken.toLowerCase() !== token.toLowerCase()) {
      throw new Error(`the API names the token ${token}, but the market's is ${marketToken}`);
    }
    return {
      signer,
      // The node calls are served at the market's address (it delegates to the registry).
      market: marketContract,
      registry: new e.Contract(market, abi.NodeRegistry, signer),
      token: new e.Contract(marketToken, abi.GantryTestToken, signer),
    };
  },

  /** The account's money: token balance, market credits, allowance to the market. */
  async balances() {
    const { market, token } = await this.contracts();
    const [balance, credits, allowance] = await Promise.all([
      token.balanceOf(this.account),
      market.creditOf(this.account),
      token.allowance(this.account, market.target),
    ]);
    return { balance, credits, allowance };
  },

  /** Sends `tx` (a promise of a sent transaction) and waits for its receipt; a revert
   * throws with the contract's reason. */
  async confirm(tx) {
    const sent = await tx;
    const receipt = await sent.wait();
    if (receipt.status !== 1) throw new Error(`transaction ${receipt.hash} reverted`);
    return receipt;
  },

  /** An EIP-2612 permit for `spender` to pull `value` from the account until `deadline`:
   * `{v, r, s}` (the token's domain from ERC-5267, its nonce from `nonces`). */
  async permit(spender, value, deadline) {
    const e = await ethers();
    const { signer, token } = await this.contracts();
    const [domain, nonce] = await Promise.all([token.eip712Domain(), token.nonces(this.account)]);
    if (domain[4].toLowerCase() !== token.target.toLowerCase()) {
      throw new Error(`the token's permit domain names ${domain[4]}, not the token ${token.target}`);
    }
    const signature = await signer.signTypedData(
      { name: domain[1], version: domain[2], chainId: domain[3], verifyingContract: domain[4] },
      { Permit: [
        { name: 'owner', type: 'address' }, { name: 'spender', type: 'address' },
        { name: 'value', type: 'uint256' }, { name: 'nonce', type: 'uint256' },
        { name: 'deadline', type: 'uint256' },
      ] },
      { owner: this.account, spender, value, nonce, deadline },
    );
    return e.Signature.from(signature);
  },
};

const READY_MESSAGE = {
  absent: 'no wallet in this browser: install one (or use the CLI, `gantry`)',
  disconnected: 'connect your wallet first',
  'wrong-chain': 'your wallet is on another network: switch it to Gantry\'s',
};

/** What the status means, in words, for a page's notice. */
export function readyMessage() {
  return READY_MESSAGE[wallet.status()] ?? '';
}

// Listening, then asking: wallets announce themselves now and whenever they load.
window.addEventListener('eip6963:announceProvider', (event) => {
  const { info, provider } = event.detail ?? {};
  if (!info?.uuid || typeof provider?.request !== 'function') return;
  announced.set(info.uuid, { info, provider });
  emit();
  // The wallet the user connected last time, if it still grants the account: connected
  // again without asking.
  if (info.uuid === localStorage.getItem(REMEMBERED) && !wallet.provider) {
    wallet.connect(info.uuid, { ask: false }).catch(() => {});
  }
});
window.dispatchEvent(new Event('eip6963:requestProvider'));
