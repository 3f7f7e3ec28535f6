// Formatting and HTML templating. Amounts are the payment token's base units as decimal
// strings, shown with its decimals and symbol (`GET /v1/token`, set once by `useToken`
// before the first view); chain times are unix seconds, worker times unix milliseconds.

let DECIMALS = 6n;
let UNIT = 10n ** DECIMALS;
let SYMBOL = 'gUSD';

/** Shows amounts as `token` (`{symbol, decimals}`) says. */
export function useToken(token) {
  DECIMALS = BigInt(token.decimals);
  UNIT = 10n ** DECIMALS;
  SYMBOL = token.symbol;
}

/** The payment token's symbol. */
export const symbol = () => SYMBOL;

/** Text already escaped (or trusted markup), passed through `html` as is. */
class Markup {
  constructor(text) { this.text = text; }
  toString() { return this.text; }
}

/** Marks trusted markup (built by `html` or the chart functions). */
export const raw = (text) => new Markup(text);

function escape(value) {
  if (value instanceof Markup) return value.text;
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return value.map(escape).join('');
  return String(value).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Tagged template: every interpolated value is escaped unless it is `Markup`. */
export function html(strings, ...values) {
  let out = strings[0];
  values.forEach((value, i) => { out += escape(value) + strings[i + 1]; });
  return new Markup(out);
}

/** A uint from the API (decimal string, 0x hex string or number) as a BigInt. */
export function big(value) {
  try {
    return BigInt(value ?? 0);
  } catch {
    return 0n;
  }
}

/** `50000000` → `50.00` (6 decimals): at least two decimals, at most the token's,
 * thousands grouped. */
export function tokens(base) {
  const value = big(base);
  const sign = value < 0n ? '-' : '';
  const abs = value < 0n ? -value : value;
  const whole = (abs / UNIT).toLocaleString('en-US');
  let fraction = (abs % UNIT).toString().padStart(Number(DECIMALS), '0').replace(/0+$/, '');
  fraction = fraction.padEnd(2, '0');
  return `${sign}${whole}.${fraction}`;
}

/** `50.5` → `50500000n` (6 decimals): a decimal amount of tokens in base units, as the
 * token's decimals (`useToken`) say; null when it is not one. */
export function baseUnits(text) {
  const match = /^(\d+)(?:\.(\d*))?$/.exec(String(text).trim());
  const fraction = match?.[2] ?? '';
  if (!match || fraction.length > Number(DECIMALS)) return null;
  return BigInt(match[1]) * UNIT + BigInt(fraction.padEnd(Number(DECIMALS), '0') || '0');
}

/** `50000000` → `50.00 gUSD`. */
export const money = (base) => `${tokens(base)} ${SYMBOL}`;

/** 2^96 − 1: the price limit of a job that takes any price (what the CLI posts without
 * `--max-price`). */
export const ANY_PRICE = (1n << 96n) - 1n;

/** A job's price limit per GPU-hour in words: `any price`, or `≤ 2.50 gUSD per GPU-hour`. */
export const priceLimit = (base) => (big(base) >= ANY_PRICE ? 'any price' : `≤ ${money(base)} per GPU-hour`);

/** GPUs asked for or offered, as the CLI says them: `no GPU`, `2× any GPU`,
 * `8× NVIDIA-H100-80GB`. */
export function gpus(count, model) {
  const n = Number(big(count));
  if (!n && !model) return 'no GPU';
  return `${n}× ${model || 'any GPU'}`;
}

/** Seconds as `45s`, `3m 07s`, `2h 05m`, `4d 3h`, `12y`. */
export function duration(seconds) {
  let s = Math.max(0, Math.round(Number(seconds) || 0));
  if (s < 60) return `${s}s`;
  const units = [['y', 31_536_000], ['d', 86_400], ['h', 3_600], ['m', 60], ['s', 1]];
  const first = units.findIndex(([, size]) => s >= size);
  const [bigName, bigSize] = units[first];
  const [smallName, smallSize] = units[first + 1] ?? [];
  const major = Math.floor(s / bigSize);
  if (bigName === 'y' || !smallName) return `${major}${bigName}`;
  s -= major * bigSize;
  const minor = Math.floor(s / smallSize);
  const pad = smallName === 'm' || smallName === 's' ? String(minor).padStart(2, '0') : minor;
  return `${major}${bigName} ${pad}${smallName}`;
}

export const nowSecs = () => Date.now() / 1000;

/** Relative time of a unix-seconds instant in the past, updated live (see `tick`). */
export const ago = (secs) => html`<time data-ago="${secs}" title="${dateTime(secs)}">${duration(nowSecs() - secs)} ago</time>`;

/** Countdown to a unix-seconds instant, updated live (see `tick`). */
export const until = (secs) => html`<time data-until="${secs}" title="${dateTime(secs)}">${countdown(secs)}</time>`;

function countdown(secs) {
  const left = secs - nowSecs();
  return left > 0 ? duration(left) : 'now';
}

/** Refreshes the live relative times in `root`. */
export function tick(root = document) {
  for (const el of root.querySelectorAll('[data-ago]')) {
    el.textContent = `${duration(nowSecs() - Number(el.dataset.ago))} ago`;
  }
  for (const el of root.querySelectorAll('[data-until]')) {
    el.textContent = countdown(Number(el.dataset.until));
  }
}

export function dateTime(secs) {
  return new Date(secs * 1000).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'medium' });
}

export const clock = (secs) => new Date(secs * 1000).toLocaleTimeString('en-GB', { hour: '2-digit', minute: '2-digit' });

/** `0x1234…abcd`. */
export const short = (hex) => (hex && hex.length > 14 ? `${hex.slice(0, 6)}…${hex.slice(-4)}` : hex ?? '');

export const percent = (fraction, digits = 0) => `${(fraction * 100).toFixed(digits)}%`;

export const mib = (value) => (value >= 1024 ? `${+(value / 1024).toFixed(1)} GiB` : `${value} MiB`);

export function bytes(n) {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  let value = Number(n);
  while (value >= 1000 && i < units.length - 1) { value /= 1000; i += 1; }
  return `${i ? value.toFixed(1) : value} ${units[i]}`;
}

/** A GPU model's name as its bytes32 id, as the CLI and the worker make it: the name,
 * spaces as dashes, right-padded with zeros and cut at 32 bytes. */
export function modelId(name) {
  const bytes = new TextEncoder().encode(name.trim().split(/\s+/).join('-')).slice(0, 32);
  return `0x${[...bytes].map((b) => b.toString(16).padStart(2, '0')).join('').padEnd(64, '0')}`;
}

/** A right-padded bytes32 (0x hex) as its text: `NVIDIA-H100-80GB`; empty for zero. */
export function bytes32Text(hex) {
  if (typeof hex !== 'string' || !hex.startsWith('0x')) return String(hex ?? '');
  let out = '';
  for (let i = 2; i + 1 < hex.length; i += 2) {
    const code = parseInt(hex.slice(i, i + 2), 16);
    if (code === 0) break;
    out += String.fromCharCode(code);
  }
  return out;
}

/** JSON text parsed, or null (job specs are raw bytes from the chain, not always JSON). */
export function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** A JSON value the API sends as an object or (older APIs) as JSON text: the object, or
 * null when it is neither. */
export function jsonObject(value) {
  const parsed = typeof value === 'string' ? parseJson(value) : value;
  return parsed !== null && typeof parsed === 'object' ? parsed : null;
}

/** A job's spec: `{json}` when it is JSON (`spec` an object, or JSON text from an older
 * API), else `{text}`, the posted bytes as text (`specText`, or the text itself). */
export function jobSpec(job) {
  const json = jsonObject(job.spec);
  if (json) return { json };
  return { text: typeof job.spec === 'string' ? job.spec : job.specText ?? '' };
}

/** The image a job's spec names, without registry, tag or digest: `acme/train`; a WASM
 * module's file name. */
export function imageName(job) {
  // A list's summary names what runs (`runs`); a whole row has its spec.
  const spec = jobSpec(job).json;
  const brief = 'runs' in job && !spec;
  if (brief ? job.engine === 'wasm' : spec?.engine === 'wasm') {
    const uri = brief ? job.runs : spec.wasm?.module?.uri;
    const file = typeof uri === 'string' ? uri.split(/[?#]/)[0].split('/').filter(Boolean).pop() : '';
    return `wasm · ${file || 'module'}`;
  }
  const image = brief ? job.runs : spec?.image;
  if (typeof image !== 'string') return '';
  let name = image.split('@')[0];
  if (name.lastIndexOf(':') > name.lastIndexOf('/')) name = name.slice(0, name.lastIndexOf(':'));
  const parts = name.split('/');
  if (parts.length > 1 && /[.:]/.test(parts[0])) parts.shift();
  return parts.join('/');
}

/** Status badge. `assigned` reads "running", what it means to a submitter. */
export function status(value) {
  const label = value === 'assigned' ? 'running' : value;
  return html`<span class="badge s-${value}">${label}</span>`;
}

/** Progress bar for a fraction 0..1. */
export function bar(fraction, label = percent(fraction)) {
  const value = Math.round(Math.min(1, Math.max(0, fraction)) * 100);
  return html`<span class="bar" role="progressbar" aria-valuemin="0" aria-valuemax="100" aria-valuenow="${value}"><span class="fill" style="width:${value}%"></span></span><span class="bar-label">${label}</span>`;
}
