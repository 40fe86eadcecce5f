// api.js: the bridge's HTTP API as seen from the browser. When the server
// requires a token, the page exchanges it once for the bridge's HttpOnly
// login cookie (login), which the browser then sends with every request,
// streams included: no script on the page, an injected one included, can
// read the token back, as it could from sessionStorage, and it never
// appears in a URL.

// ApiError carries the server's error code and its sentence for people.
export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body || {};
  }
}

let tokenWaiters = [];
let onUnauthorized = () => {};

// login exchanges token for the login cookie (POST /auth/login) and wakes
// everything that was waiting for one. A wrong token rejects with the
// server's ApiError and sets nothing.
export async function login(token) {
  return postLogin({ token });
}

// loginWithCode exchanges a login link's one-time code (up prints the
// link, /ui/login#code=…) for the login cookie of a new person token.
export async function loginWithCode(code) {
  return postLogin({ code });
}

// redeemPairing exchanges a pairing link's one-time code (agent-bridge
// pair prints the link, /ui/#pair=…) for this device's own person token as
// the login cookie, and returns the bridge's answer ({device}). A used or
// expired code rejects with the server's ApiError, without asking for a
// token as other calls would.
export async function redeemPairing(code) {
  return postLogin({ code }, "/auth/pair/redeem");
}

async function postLogin(body, path = "/auth/login") {
  const res = await fetch(path, {
    method: "POST",
    headers: { Accept: "application/json", "Content-Type": "application/json" },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  if (!res.ok) throw await errorFrom(res);
  const answer = await res.json().catch(() => ({}));
  const waiters = tokenWaiters;
  tokenWaiters = [];
  for (const w of waiters) w();
  return answer;
}

// setUnauthorizedHandler names the function that asks the person for a token.
export function setUnauthorizedHandler(fn) {
  onUnauthorized = fn;
}

function waitForToken(signal) {
  return new Promise((resolve) => {
    tokenWaiters.push(resolve);
    if (signal) signal.addEventListener("abort", resolve, { once: true });
  });
}

function headers(extra) {
  return Object.assign({ Accept: "application/json" }, extra || {});
}

async function errorFrom(res) {
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  const e = body && body.error ? body.error : {};
  const message = e.message || `The bridge answered ${res.status} ${res.statusText}.`;
  return new ApiError(res.status, e.code || "http_" + res.status, message, e);
}

// request sends one API call and returns the decoded JSON answer. A 401
// asks for a token and retries once it is given.
export async function request(method, path, body, { signal } = {}) {
  for (;;) {
    const init = { method, headers: headers(), signal, credentials: "same-origin" };
    if (body instanceof Blob) {
      // A file (an upload, attachments.js) is sent as it is.
      init.headers["Content-Type"] = "application/octet-stream";
      init.body = body;
    } else if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    if (res.ok) return res.json();
    const err = await errorFrom(res);
    if (res.status === 401) {
      onUnauthorized(err);
      await waitForToken(signal);
      if (signal && signal.aborted) throw err;
      continue;
    }
    throw err;
  }
}

export const get = (path, opts) => request("GET", path, undefined, opts);
export const post = (path, body, opts) => request("POST", path, body, opts);

export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    if (signal) {
      signal.addEventListener("abort", () => {
        clearTimeout(t);
        resolve();
      }, { once: true });
    }
  });
}

// stream follows an SSE endpoint until signal aborts, reconnecting with
// capped backoff. Each reconnect resumes after the last id seen (or the
// cursor() the caller reports, which also covers events loaded by other
// means), so a server restart loses nothing; the caller drops duplicates by
// id. Handlers: onMessage(eventName, data, id), onStatus("live" |
// "reconnecting" | "unauthorized"), onError(ApiError) for refusals such as
// cursor_ahead, which return the next cursor to use (or null to stop).
export async function stream(path, { cursor, onMessage, onStatus, onError, signal }) {
  let backoff = 250;
  while (!signal.aborted) {
    const after = cursor();
    const url = after === null || after === undefined ? path : `${path}${path.includes("?") ? "&" : "?"}after=${after}`;
    let res;
    try {
      res = await fetch(url, { headers: headers({ Accept: "text/event-stream" }), signal, cache: "no-store", credentials: "same-origin" });
    } catch {
      if (signal.aborted) return;
      onStatus("reconnecting");
      await sleep(backoff, signal);
      backoff = Math.min(backoff * 2, 5000);
      continue;
    }
    if (!res.ok) {
      const err = await errorFrom(res);
      if (res.status === 401) {
        onStatus("unauthorized");
        onUnauthorized(err);
        await waitForToken(signal);
        continue;
      }
      if (onError && onError(err) === false) return;
      onStatus("reconnecting");
      await sleep(backoff, signal);
      backoff = Math.min(backoff * 2, 5000);
      continue;
    }
    onStatus("live");
    backoff = 250;
    try {
      await readSSE(res.body, onMessage);
    } catch {
      // A dropped connection ends the read; fall through to reconnect.
    }
    if (signal.aborted) return;
    onStatus("reconnecting");
    await sleep(backoff, signal);
    backoff = Math.min(backoff * 2, 5000);
  }
}

// readSSE parses a text/event-stream body and calls onMessage for each
// dispatched message. Comments (keep-alives) are ignored.
async function readSSE(body, onMessage) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let event = "";
  let data = [];
  let id = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let nl;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf[nl] === "\r" && buf[nl + 1] === "\n" ? 2 : 1));
      if (line === "") {
        if (data.length) onMessage(event || "message", data.join("\n"), id);
        event = "";
        data = [];
        id = null;
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let val = colon < 0 ? "" : line.slice(colon + 1);
      if (val.startsWith(" ")) val = val.slice(1);
      if (field === "data") data.push(val);
      else if (field === "event") event = val;
      else if (field === "id") id = val;
    }
  }
}
