// The job-spec validator, mirrored from contracts/protocol/src/spec.rs (`JobSpec::from_slice`
// and `validate`) so that the web app refuses what the market's readers refuse, with the
// same field and reason, before anything is posted. It is held to the Rust rules by a
// shared corpus (contracts/protocol/tests/spec_corpus.json): the protocol's tests run it
// through spec.rs, api/tests/validate/ through this file. Change a rule in both and add
// its case; never here alone.
//
// The Rust side reads the posted bytes with serde, so this file reads the text with its
// own small JSON reader rather than JSON.parse: serde refuses what JSON.parse takes (a key
// given twice, `60.0` or `1e3` where an integer goes, integers beyond 2^53, lone surrogate
// escapes) and takes forms nobody writes on purpose (a struct as an array of its fields,
// an enum as `{"name": null}`). Plain ES module, no DOM, no dependencies, no eval.

export const MAX_SPEC_BYTES = 16_384;
export const FIRST_SPEC_VERSION = 1;
export const SPEC_VERSION = 3;
export const INPUTS_DIR = '/inputs';
export const OUTPUTS_DIR = '/outputs';
export const MAX_WASM_MEMORY_MIB = 4096;
export const INPUT_SCHEMES = ['https://', 'http://', 'ipfs://', 'nats://', 's3://', 'file://'];

/**
 * Checks a job spec as `JobSpec::from_slice` does: `input` is the spec's text as it will
 * be posted, or a value to post as `JSON.stringify(value)`.
 *
 * @returns {{ok: true, spec: object} | {ok: false, error: string, field: ?string,
 *   reason: string, message: string}} `error` is `invalid` (a value the rules refuse;
 *   `message` is Rust's `spec field {field}: {reason}`), `malformed` (not a spec's JSON;
 *   the reason is this file's, serde's words differ), `too-large` or
 *   `unsupported-version` (`message` as Rust's).
 */
export function validateSpec(input) {
  // What the browser posts: UTF-8, a lone surrogate as U+FFFD.
  const text = (typeof input === 'string' ? input : (JSON.stringify(input) ?? '')).toWellFormed();
  const bytes = utf8Length(text);
  try {
    if (bytes > MAX_SPEC_BYTES) {
      throw new Refusal('too-large', null, 'too large',
        `spec is ${bytes} bytes, more than the ${MAX_SPEC_BYTES} the market accepts`);
    }
    const json = readJson(text);
    // The version first, so that a newer spec is reported as such.
    const { version } = Versioned(json, '');
    if (version < FIRST_SPEC_VERSION || version > SPEC_VERSION) {
      throw new Refusal('unsupported-version', 'version', 'not supported',
        `spec version ${version} is not supported (this build knows versions ` +
        `${FIRST_SPEC_VERSION} to ${SPEC_VERSION})`);
    }
    const spec = JobSpec(json, '');
    check(spec);
    return { ok: true, spec };
  } catch (error) {
    if (!(error instanceof Refusal)) throw error;
    const { kind, field, reason, message } = error;
    return { ok: false, error: kind, field, reason, message };
  }
}

/** Whether `image` is a reference Docker accepts (oci-spec's `Reference` grammar). */
export function isImageReference(image) {
  const match = REFERENCE.exec(image);
  if (!match) return false;
  const [, name, , digest] = match;
  if (repositoryOf(name).length > 255) return false;
  if (digest === undefined) return true;
  const colon = digest.indexOf(':');
  return DIGEST_LENGTHS.get(digest.slice(0, colon)) === digest.length - colon - 1;
}

/** Whether a worker can fetch `uri`: one of `INPUT_SCHEMES`, no space or control character. */
export function isFetchableUri(uri) {
  return INPUT_SCHEMES.some((scheme) => uri.startsWith(scheme)) && !SPACE_OR_CONTROL.test(uri);
}

/** Whether `hash` is a hex SHA-256: 64 hex digits, either case. */
export function isSha256(hash) {
  return /^[0-9a-fA-F]{64}$/.test(hash);
}

/**
 * Whether `text` is an age X25519 recipient (`age1…`, bech32, 32 bytes) that is safe to
 * encrypt to (encryption.rs `recipient`): not one of the low-order keys, which every
 * shared secret with is zero. Spaces around it are allowed, as Rust trims them.
 */
export function isAgeRecipient(text) {
  const trimmed = text.replace(RUST_TRIM, '');
  // All lower or all upper case, 52 data characters (32 bytes and 4 padding bits, which
  // are not checked) and a 6-character checksum.
  if (!/^(?:age1[qpzry9x8gf2tvdw0s3jn54khce6mua7l]{58}|AGE1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58})$/.test(trimmed)) {
    return false;
  }
  const values = [...trimmed.slice(4).toLowerCase()].map((c) => BECH32.indexOf(c));
  // The checksum over the expanded prefix "age" (bech32, not bech32m).
  if (bech32Polymod([3, 3, 3, 0, 1, 7, 5, ...values]) !== 1) return false;
  const bytes = [];
  let bits = 0;
  let acc = 0;
  for (const value of values.slice(0, 52)) {
    acc = ((acc << 5) | value) & 0xfff;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      bytes.push((acc >> bits) & 0xff);
    }
  }
  // The key is a little-endian u-coordinate; X25519 ignores its top bit and reads it mod p.
  const u = (bytes.reduceRight((n, byte) => n * 256n + BigInt(byte), 0n) % 2n ** 255n) % P;
  return !LOW_ORDER.includes(u);
}

/** Whether `path` is `dir` or a normal absolute path below it (spec.rs `is_within`). */
export function isWithin(path, dir) {
  if (!path.startsWith(dir)) return false;
  const rest = path.slice(dir.length);
  if (rest === '') return true;
  if (!rest.startsWith('/')) return false;
  return rest
    .slice(1)
    .split('/')
    .every((part) => part !== '' && part !== '.' && part !== '..' && !part.includes('\0'));
}

/** The highest scheduling priority and the longest runtime the market takes. */
export const MAX_PRIORITY = 10;
export const MAX_RUNTIME_SECS = 7 * 24 * 3600;

/**
 * Why the market refuses to post a job with these requirements (market.rs
 * `requirements_refusal`, the contract's `_checkRequirements`, in its order), or null.
 * `r` is shaped as the API's `RequirementsRow`: numbers, `gpuModel` as 0x hex.
 * Held to the Rust rules by contracts/protocol/tests/requirements_corpus.json.
 *
 * @returns {null | {field: string, reason: string}}
 */
export function validateRequirements(r) {
  if (!(r.priority >= 1 && r.priority <= MAX_PRIORITY)) return { field: 'priority', reason: `must be 1 to ${MAX_PRIORITY}` };
  if (!(r.maxRuntime >= 1 && r.maxRuntime <= MAX_RUNTIME_SECS)) {
    return { field: 'maxRuntime', reason: `must be 1 to ${MAX_RUNTIME_SECS} seconds (7 days)` };
  }
  const model = /^0x0*$/.test(r.gpuModel) ? 0n : BigInt(r.gpuModel);
  if (model !== 0n && r.minGpuCount === 0) return { field: 'minGpuCount', reason: 'a GPU model needs at least one GPU' };
  if (r.engine !== 0 && r.engine !== 1) return { field: 'engine', reason: `unknown engine ${r.engine}` };
  if (r.engine === 1 && (r.minGpuCount !== 0 || r.minVramMiB !== 0)) {
    return { field: 'minGpuCount', reason: 'a WASM job runs on the CPU: no GPU and no VRAM' };
  }
  return null;
}

// --- The rules (spec.rs `JobSpec::validate`, in its order: the first refusal is reported)

const IMAGE_REASON = 'must be an image reference Docker accepts: ' +
  '[registry/]lower-case/path[:tag][@sha256:<64 hex digits>]';
const URI_REASON = 'must be an https, http, ipfs, nats, s3 or file URI without spaces';
const HEX_REASON = 'must be 64 hex digits';
const RECIPIENT_REASON = 'must be an age X25519 recipient (age1…)';

function check(spec) {
  if (spec.engine === 'docker') checkDocker(spec);
  else checkWasm(spec);
  if (spec.command.some((arg) => arg.includes('\0'))) {
    invalid('command', 'arguments may not contain a NUL byte');
  }
  if (spec.timeoutSecs === 0) invalid('timeoutSecs', 'must be positive');
  if (!isWithin(spec.outputs.path, OUTPUTS_DIR)) {
    invalid('outputs.path', 'must be /outputs or a directory below it');
  }
  if (spec.outputs.maxBytes === 0) invalid('outputs.maxBytes', 'must be positive');
  const percent = spec.resources.gpuMemoryPercent;
  if (percent !== undefined && (percent < 1 || percent > 100)) {
    invalid('resources.gpuMemoryPercent', 'must be 1 to 100');
  }
  if (spec.resources.cpuThreads === 0) invalid('resources.cpuThreads', 'must be positive');
  const paths = new Set();
  for (const input of spec.inputs) {
    if (!isFetchableUri(input.uri)) invalid('inputs.uri', URI_REASON);
    if (input.path === INPUTS_DIR || !isWithin(input.path, INPUTS_DIR)) {
      invalid('inputs.path', 'must be a file path below /inputs');
    }
    if (paths.has(input.path)) invalid('inputs.path', 'two inputs share a path');
    paths.add(input.path);
    if (input.maxBytes === 0) invalid('inputs.maxBytes', 'must be positive');
    if (input.sha256 !== undefined && !isSha256(input.sha256)) invalid('inputs.sha256', HEX_REASON);
  }
  checkEncryption(spec);
  if (Object.keys(spec.env).some((name) => name === '' || /[=\0]/.test(name))) {
    invalid('env', "names must be non-empty and contain no '=' or NUL byte");
  }
  if (Object.values(spec.env).some((value) => value.includes('\0'))) {
    invalid('env', 'values may not contain a NUL byte');
  }
}

function checkEncryption(spec) {
  const encryptedInputs = spec.inputs.some((input) => input.encrypted);
  const { encryption } = spec;
  if (encryption === undefined) {
    if (encryptedInputs) invalid('inputs.encrypted', 'an encrypted input needs `encryption`');
    return;
  }
  if (spec.version < 3) invalid('encryption', 'needs spec version 3');
  if (!isAgeRecipient(encryption.recipient)) invalid('encryption.recipient', RECIPIENT_REASON);
  if (encryption.jobKey !== undefined && !isAgeRecipient(encryption.jobKey)) {
    invalid('encryption.jobKey', RECIPIENT_REASON);
  }
  if (encryption.jobKey === undefined && encryptedInputs) {
    invalid('encryption.jobKey', "encrypted inputs need the job key's recipient");
  }
  if (encryption.keySalt !== undefined && !/^[0-9a-fA-F]{32}$/.test(encryption.keySalt)) {
    invalid('encryption.keySalt', 'must be 32 hex digits');
  }
  if (spec.inputs.some((input) => input.encrypted && input.sha256 === undefined)) {
    invalid('inputs.sha256', "an encrypted input names its ciphertext's SHA-256");
  }
}

function checkDocker(spec) {
  if (spec.wasm !== undefined) invalid('wasm', 'only a WASM job ("engine":"wasm") has a module');
  if (!isImageReference(spec.image)) invalid('image', IMAGE_REASON);
}

function checkWasm(spec) {
  if (spec.version < 2) invalid('engine', 'needs spec version 2');
  if (spec.image !== '') invalid('image', 'a WASM job runs a module, not an image');
  if (spec.resources.gpuMemoryPercent !== undefined) {
    invalid('resources.gpuMemoryPercent', 'a WASM job runs on the CPU only');
  }
  const { wasm } = spec;
  if (wasm === undefined) invalid('wasm', 'a WASM job names its module');
  if (!isFetchableUri(wasm.module.uri)) invalid('wasm.module.uri', URI_REASON);
  if (!isSha256(wasm.module.sha256)) invalid('wasm.module.sha256', HEX_REASON);
  if (wasm.module.maxBytes === 0) invalid('wasm.module.maxBytes', 'must be positive');
  const { entry } = wasm;
  if (entry !== undefined && (entry === '' || utf8Length(entry) > 256 || entry.includes('\0'))) {
    invalid('wasm.entry', 'must be an export name of 1 to 256 bytes without NUL');
  }
  const mib = wasm.memoryMib;
  if (mib !== undefined && (mib < 1 || mib > MAX_WASM_MEMORY_MIB)) {
    invalid('wasm.memoryMib', 'must be 1 to 4096');
  }
  if (wasm.deterministic && mib === undefined) {
    invalid('wasm.memoryMib', 'a deterministic job names its memory limit');
  }
}

// --- The image-reference grammar (oci-spec 0.10 `REFERENCE_REGEXP`)
//
// The same language, written so that a backtracking engine stays fast: the original's
// path separator `[-]*` may be empty, which makes `(sep [a-z0-9]+)+` exponential on a long
// name that fails to match; `-+` with the separator optional is the same language. Rust's
// `\w` is Unicode's word class, hence the property escapes.
const WORD = '\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}';
const DOMAIN_PART = '[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?';
const PATH_PART = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const REFERENCE = new RegExp(
  `^((?:${DOMAIN_PART}(?:\\.${DOMAIN_PART})*(?::[0-9]+)?/)?${PATH_PART}(?:/${PATH_PART})*)` +
  `(?::([${WORD}][${WORD}.-]{0,127}))?` +
  '(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}))?$',
  'u',
);
const DIGEST_LENGTHS = new Map([['sha256', 64], ['sha384', 96], ['sha512', 128]]);

/** The repository part of an image name, as oci-spec's `split_domain` makes it. */
function repositoryOf(name) {
  const slash = name.indexOf('/');
  const left = slash < 0 ? '' : name.slice(0, slash);
  let domain = 'docker.io';
  let repository = name;
  if (left.includes('.') || left.includes(':') || left === 'localhost') {
    domain = left === 'index.docker.io' ? 'docker.io' : left;
    repository = name.slice(slash + 1);
  }
  return domain === 'docker.io' && !repository.includes('/') ? `library/${repository}` : repository;
}

// --- Characters as Rust classifies them: `char::is_whitespace` is Unicode's White_Space
// (not JavaScript's \s, which has U+FEFF and lacks U+0085), `char::is_control` is Cc.
const WHITE_SPACE = '\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const RUST_TRIM = new RegExp(`^[${WHITE_SPACE}]+|[${WHITE_SPACE}]+$`, 'g');
const SPACE_OR_CONTROL = new RegExp(`[${WHITE_SPACE}\\0-\\x1f\\x7f-\\x9f]`);

// --- age recipients: bech32 and the low-order points of Curve25519 and its twist
const BECH32 = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
const P = 2n ** 255n - 19n;
// u = 0 and the points of order 4 and 8 (x25519-dalek maps them all to a zero secret).
const LOW_ORDER = [
  0n,
  1n,
  P - 1n,
  325606250916557431795983626356110631294008115727848805560023387167927233504n,
  39382357235489614581723060781553021112529911719440698176882885853963445705823n,
];

function bech32Polymod(values) {
  const generator = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];
  let checksum = 1;
  for (const value of values) {
    const top = checksum >>> 25;
    checksum = ((checksum & 0x1ffffff) << 5) ^ value;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) checksum ^= generator[i];
  }
  return checksum;
}

// --- Reading the spec's types as serde does (`#[serde(rename_all = "camelCase",
// deny_unknown_fields)]` on every struct; `Option`s and `#[serde(default)]` fields may be
// missing, only an `Option` may be null)

const REQUIRED = Symbol('required');
const none = () => undefined;

const integer = (max) => (value, at) => {
  if (value instanceof JsonNumber && /^(?:0|[1-9][0-9]*)$/.test(value.text) && BigInt(value.text) <= max) {
    return Number(value.text); // Beyond 2^53 rounded, never to 0: the rules stay exact.
  }
  throw malformed(at, `expected an integer from 0 to ${max}`);
};
const u8 = integer(0xffn);
const u16 = integer(0xffffn);
const u32 = integer(0xffff_ffffn);
const u64 = integer(2n ** 64n - 1n);

function string(value, at) {
  if (typeof value === 'string' && value.isWellFormed()) return value;
  throw malformed(at, 'expected a string');
}

function bool(value, at) {
  if (typeof value === 'boolean') return value;
  throw malformed(at, 'expected true or false');
}

const option = (read) => (value, at) => (value === null ? undefined : read(value, at));

const list = (read) => (value, at) => {
  if (!Array.isArray(value)) throw malformed(at, 'expected an array');
  return value.map((item, i) => read(item, `${at}[${i}]`));
};

/** A `BTreeMap<String, _>`: a key given twice keeps its last value. */
const map = (read) => (value, at) => {
  if (!(value instanceof JsonObject)) throw malformed(at, 'expected an object');
  return Object.fromEntries(value.entries.map(([key, item]) => [string(key, at), read(item, `${at}.${key}`)]));
};

/** A unit-variant enum: `"name"`, or `{"name": null}` as serde also reads it. */
const variant = (...names) => (value, at) => {
  if (typeof value === 'string' && names.includes(value)) return value;
  if (value instanceof JsonObject && value.entries.length === 1) {
    const [[name, unit]] = value.entries;
    if (names.includes(name) && unit === null) return name;
  }
  throw malformed(at, `expected ${names.join(' or ')}`);
};

/** A struct from an object of its fields, or (serde's other form) an array of them in order. */
const struct = (fields, { ignoreUnknown = false } = {}) => (value, at) => {
  const given = new Map();
  if (Array.isArray(value)) {
    if (value.length > fields.length) throw malformed(at, 'too many fields');
    value.forEach((item, i) => given.set(fields[i][0], item));
  } else if (value instanceof JsonObject) {
    for (const [key, item] of value.entries) {
      const where = at ? `${at}.${key}` : key;
      string(key, where);
      if (!fields.some(([name]) => name === key)) {
        if (ignoreUnknown) continue;
        throw malformed(where, 'unknown field');
      }
      if (given.has(key)) throw malformed(where, 'given twice');
      given.set(key, item);
    }
  } else {
    throw malformed(at, 'expected an object');
  }
  const read = {};
  for (const [name, type, fallback] of fields) {
    const where = at ? `${at}.${name}` : name;
    if (given.has(name)) read[name] = type(given.get(name), where);
    else if (fallback === REQUIRED) throw malformed(where, 'missing');
    else read[name] = fallback();
  }
  return read;
};

const ModuleSpec = struct([['uri', string, REQUIRED], ['sha256', string, REQUIRED], ['maxBytes', option(u64), none]]);
const WasmSpec = struct([
  ['module', ModuleSpec, REQUIRED],
  ['entry', option(string), none],
  ['memoryMib', option(u32), none], // `memory_mib` in camelCase
  ['deterministic', bool, () => false],
]);
const InputSpec = struct([
  ['uri', string, REQUIRED],
  ['sha256', option(string), none],
  ['path', string, REQUIRED],
  ['maxBytes', option(u64), none],
  ['encrypted', bool, () => false],
]);
const OutputSpec = struct([['path', string, () => OUTPUTS_DIR], ['maxBytes', option(u64), none]]);
const Resources = struct([['cpuThreads', option(u16), none], ['gpuMemoryPercent', option(u8), none]]);
const Encryption = struct([
  ['recipient', string, REQUIRED],
  ['jobKey', option(string), none],
  ['keySalt', option(string), none],
]);
const JobSpec = struct([
  ['version', u32, REQUIRED],
  ['kind', variant('training', 'inference'), () => 'training'],
  ['engine', variant('docker', 'wasm'), () => 'docker'],
  ['image', string, () => ''],
  ['command', list(string), () => []],
  ['env', map(string), () => ({})],
  ['inputs', list(InputSpec), () => []],
  ['outputs', OutputSpec, REQUIRED],
  ['resources', Resources, () => ({})],
  ['timeoutSecs', u64, REQUIRED],
  ['wasm', option(WasmSpec), none],
  ['encryption', option(Encryption), none],
]);
/** What `from_slice` reads first: the version, every other field ignored. */
const Versioned = struct([['version', u32, REQUIRED]], { ignoreUnknown: true });

// --- JSON text to values: objects keep their entries (a key may come twice), numbers
// their text. Whitespace, escapes and number syntax as serde_json (RFC 8259).

class JsonObject {
  constructor(entries) {
    this.entries = entries;
  }
}

class JsonNumber {
  constructor(text) {
    this.text = text;
  }
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const STRING = /"(?:[^"\\\0-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/y;
const SCALAR = new RegExp(`${STRING.source}|${NUMBER.source}|true|false|null`, 'y');

function readJson(text) {
  let at = 0;
  const fail = (what) => {
    throw malformed(null, `expected ${what} at character ${at}`);
  };
  const space = () => {
    while (at < text.length && ' \t\n\r'.includes(text[at])) at += 1;
  };
  /** The next token if it matches the sticky `pattern`, after any whitespace. */
  const next = (pattern) => {
    space();
    pattern.lastIndex = at;
    const match = pattern.exec(text);
    if (match) at = pattern.lastIndex;
    return match?.[0];
  };
  // Literals checked by STRING, decoded by JSON.parse (lone surrogates included, refused
  // later where a Rust `String` is read).
  const key = () => {
    const name = next(STRING) ?? fail('a key');
    next(/:/y) ?? fail("':'");
    return JSON.parse(name);
  };
  const scalar = () => {
    const literal = next(SCALAR) ?? fail('a value');
    if (literal.startsWith('"')) return JSON.parse(literal);
    if (/^[-0-9]/.test(literal)) return new JsonNumber(literal);
    return { true: true, false: false, null: null }[literal];
  };
  // A loop, not recursion: serde skips an ignored field's value however deeply it nests.
  const open = []; // the arrays and objects being read, innermost last
  for (;;) {
    let value;
    const bracket = next(/[[{]/y);
    if (bracket === undefined) {
      value = scalar();
    } else if (next(bracket === '[' ? /]/y : /}/y) === undefined) {
      const object = bracket === '{';
      open.push({ object, items: [], key: object ? key() : null });
      continue;
    } else {
      value = bracket === '[' ? [] : new JsonObject([]);
    }
    // Add the value to its container; close each container that ends after it.
    for (;;) {
      const container = open.at(-1);
      if (container === undefined) {
        space();
        if (at !== text.length) fail('the end of the spec');
        return value;
      }
      container.items.push(container.object ? [container.key, value] : value);
      const separator = next(/[,\]}]/y) ?? fail("',' or a closing bracket");
      if (separator === ',') {
        if (container.object) container.key = key();
        break;
      }
      if (separator !== (container.object ? '}' : ']')) fail('the other closing bracket');
      open.pop();
      value = container.object ? new JsonObject(container.items) : container.items;
    }
  }
}

// --- Refusals

class Refusal extends Error {
  constructor(kind, field, reason, message) {
    super(message);
    Object.assign(this, { kind, field, reason, message });
  }
}

function malformed(field, reason) {
  const where = field ? `${field}: ` : '';
  return new Refusal('malformed', field || null, reason, `spec is not valid job-spec JSON: ${where}${reason}`);
}

function invalid(field, reason) {
  throw new Refusal('invalid', field, reason, `spec field ${field}: ${reason}`);
}

function utf8Length(text) {
  return new TextEncoder().encode(text).length;
}
