// The JSON API as the labeler page uses it: cookie login plus the CSRF header, and submits
// that survive a flaky network (same idempotency key on every try, kept in localStorage until
// the server has acknowledged them).

const CSRF_TOKEN = document.querySelector('meta[name="csrf-token"]')?.content ?? "";
const RETRY_STATUSES = new Set([502, 503, 504]);
const MAX_BACKOFF_MS = 15000;

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function newIdempotencyKey() {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  // randomUUID exists only in secure contexts; a plain-http deployment still has this.
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

// A request the page makes on its own (a recheck, a poll), with nobody at the keyboard, says
// so: it does not keep the session from ending when unused (STEPWISE_SESSION_IDLE_MINUTES).
function byWhom(unattended) {
  return unattended ? { "X-Stepwise-Unattended": "1" } : {};
}

export function postJson(url, body, { unattended = false } = {}) {
  return request(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": CSRF_TOKEN, ...byWhom(unattended) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

export function getJson(url, { unattended = false } = {}) {
  return request(url, { method: "GET", headers: byWhom(unattended) });
}

// Resolves to {data, serverDate}; serverDate (ms) lets the page show lease times in the
// server's clock even when this computer's clock is off.
async function request(url, { method, headers, body }) {
  const response = await fetch(url, {
    method,
    credentials: "same-origin",
    headers: { Accept: "application/json", ...headers },
    body,
  });
  let data = null;
  if (response.status !== 204) {
    try {
      data = await response.json();
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    throw new ApiError(response.status, data?.detail ?? `${response.status} ${response.statusText}`);
  }
  // The Date header has whole seconds: adding half a second centres the rounding error.
  const date = Date.parse(response.headers.get("Date") ?? "") + 500;
  return { data, serverDate: Number.isNaN(date) ? null : date };
}

function retryable(error) {
  return !(error instanceof ApiError) || RETRY_STATUSES.has(error.status);
}

// A wait cut short when the browser has its connection back: after a while offline the
// backoff has grown to many seconds, and the labeler waits for nothing.
function sleepUnlessOnline(ms) {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      window.removeEventListener("online", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    window.addEventListener("online", done);
  });
}

// Posts until the server answers with something other than a network failure or a gateway
// error; `onRetry(error, delayMs)` is told about each wait.
export async function postWithRetry(url, body, onRetry, options = {}) {
  let delay = 1000;
  for (;;) {
    try {
      return await postJson(url, body, options);
    } catch (error) {
      if (!retryable(error)) throw error;
      onRetry?.(error, delay);
      await sleepUnlessOnline(delay);
      delay = Math.min(delay * 2, MAX_BACKOFF_MS);
    }
  }
}

// Submits not yet acknowledged, per user, so a closed tab or a reload sends them again.
export class PendingSubmits {
  constructor(username) {
    this.key = `stepwise.pending.${username}`;
  }

  all() {
    try {
      return JSON.parse(localStorage.getItem(this.key) ?? "[]");
    } catch {
      return [];
    }
  }

  add(entry) {
    this.write([...this.all().filter((e) => e.body.idempotency_key !== entry.body.idempotency_key), entry]);
  }

  remove(idempotencyKey) {
    this.write(this.all().filter((e) => e.body.idempotency_key !== idempotencyKey));
  }

  write(entries) {
    try {
      if (entries.length) localStorage.setItem(this.key, JSON.stringify(entries));
      else localStorage.removeItem(this.key);
    } catch {
      // Storage can be full or disabled; the in-page retry still protects the label.
    }
  }
}
