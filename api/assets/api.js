// The JSON API and its live feed.
//
// The feed (`GET /v1/events`, Server-Sent Events) carries `job`, `node`, `progress`,
// `block` and `reorg` events. A view loads its data once the feed is open and queues the
// events that arrive meanwhile, so nothing falls in between. After a reconnection, a
// `lagged` event (the server dropped events for this client) or a `reorg`, views hear
// `resync` and load again.

/** GET a JSON document; an error answer throws with the API's message. */
export async function getJson(path) {
  const response = await fetch(path, { headers: { accept: 'application/json' } });
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      message = (await response.json()).error ?? message;
    } catch {
      // Not JSON: keep the status line.
    }
    const error = new Error(`${path}: ${message}`);
    error.status = response.status;
    throw error;
  }
  return response.json();
}

const RETRY_MS = 5000;
const TYPES = ['job', 'node', 'progress', 'block'];
const listeners = new Map();
let source = null;
let opened = false;
let markReady;

export const live = {
  /** `connecting`, `live` or `offline`. */
  state: 'connecting',
  /** The newest block announced: `{number, timestamp}`. */
  block: null,
  /** Settles when the feed first opens or fails: when views may load. */
  ready: new Promise((resolve) => { markReady = resolve; }),

  /** Calls `fn(data)` for each event of `type` (also `resync` and `state`); returns the unsubscriber. */
  on(type, fn) {
    if (!listeners.has(type)) listeners.set(type, new Set());
    listeners.get(type).add(fn);
    return () => listeners.get(type).delete(fn);
  },

  start() {
    source = new EventSource('/v1/events');
    source.addEventListener('open', () => {
      setState('live');
      if (opened) emit('resync');
      opened = true;
      markReady();
    });
    source.addEventListener('error', () => {
      markReady();
      if (source.readyState !== EventSource.CLOSED) {
        setState('connecting');
        return;
      }
      // Closed for good (an error answer): try again later, then load afresh.
      setState('offline');
      source = null;
      setTimeout(() => live.start(), RETRY_MS);
    });
    // Events were dropped for this client, or blocks it has seen were orphaned: reload.
    source.addEventListener('lagged', () => emit('resync'));
    source.addEventListener('reorg', () => emit('resync'));
    for (const type of TYPES) {
      source.addEventListener(type, (event) => {
        let data;
        try {
          data = JSON.parse(event.data);
        } catch {
          console.warn('unreadable event', type, event.data);
          return;
        }
        if (type === 'block') live.block = data;
        emit(type, data);
      });
    }
  },
};

function setState(state) {
  live.state = state;
  emit('state', state);
}

function emit(type, data) {
  for (const fn of listeners.get(type) ?? []) {
    try {
      fn(data);
    } catch (error) {
      console.error(error);
    }
  }
}

/**
 * A view's data, loaded by `load()` after the feed is ready and reloaded on `resync`;
 * `apply(event)` handles the live events of `types`, queued while a load is in flight.
 * `stop()` unsubscribes.
 */
export function follow({ types, load, apply, failed }) {
  let queue = null;
  let again = false;
  let stopped = false;
  const run = async () => {
    if (queue) {
      again = true;
      return;
    }
    do {
      // What arrives from here on is newer than what `load` reads.
      queue = [];
      again = false;
      try {
        await load();
      } catch (error) {
        if (!stopped) failed(error);
      }
    } while (again && !stopped);
    const queued = queue;
    queue = null;
    if (!stopped) queued.forEach(apply);
  };
  const offs = types.map((type) =>
    live.on(type, (data) => {
      if (queue) queue.push({ type, data });
      else apply({ type, data });
    }));
  offs.push(live.on('resync', run));
  live.ready.then(() => { if (!stopped) run(); });
  return () => {
    stopped = true;
    offs.forEach((off) => off());
  };
}

/** Wraps async `fn` so that calls while it runs make one more run after it, not more. */
export function coalesce(fn) {
  let running = null;
  let again = false;
  return () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        await fn();
      } while (again);
    })().finally(() => { running = null; });
    return running;
  };
}
