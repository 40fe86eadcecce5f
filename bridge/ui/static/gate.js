// gate.js: how this browser signs in, and the pages that say why it
// cannot and what to do next. A login link (/ui/login#code=…, from
// `agent-bridge up` or `agent-bridge login-link`) and a pairing link
// (/ui/#pair=…, from `agent-bridge pair`) are redeemed before anything
// else talks to the bridge; a used or expired link, a revoked or expired
// sign-in and a first visit without one each get a page of their own
// (the sign-in gate, #token-dialog) that says so in a sentence and names
// the command that makes a new link. A paired phone is greeted with the
// next step, notifications (its button is phone.js's).

import * as api from "./api.js";
import { $, el } from "./dom.js";
import { DEVICE_KEY } from "./shared.js";

// NEXT are the ways to a new sign-in, by where the person is.
const NEXT = {
  browser: ["On the computer running agent-bridge, run", "agent-bridge login-link", "and open the link it prints in this browser."],
  phone: ["To sign in a phone, run", "agent-bridge pair", "on that computer and open the link it prints (or scan its QR code) on the phone."],
};

// GATES are the gate's words: its heading, why, and the next steps first.
const GATES = {
  signin: { heading: "Sign in to agent-bridge", why: "This bridge asks who you are before it shows anything.", next: ["browser", "phone"] },
  link: { heading: "This login link no longer works", why: "A login link works once, within 10 minutes of being made, and this one was used already or is older.", next: ["browser", "phone"] },
  pair: { heading: "This pairing link no longer works", why: "A pairing link works once, within 10 minutes of being made, and this one was used already or is older.", next: ["phone", "browser"] },
  revoked: { heading: "This device was signed out", why: "Its sign-in was revoked on the bridge, so it can no longer read or write here.", next: ["phone", "browser"] },
  expired: { heading: "Your sign-in has expired", why: "", next: ["browser", "phone"] },
  unknown: { heading: "This sign-in is not known here", why: "The bridge does not know the sign-in this browser kept (its data may have been replaced).", next: ["browser", "phone"] },
};

// tokenTried is whether the person has pasted a token yet: a refusal then
// is about that token, and is said under the field.
let tokenTried = false;
// shown is the gate on screen ("" for none). The page's first request
// after a used link is refused for want of a sign-in; the gate about the
// link says more, and stays.
let shown = "";

// gateOf picks the gate for a refusal: the server names the field "token"
// when the browser presented a sign-in it refuses, and says why.
function gateOf(err) {
  const body = (err && err.body) || {};
  if (body.field !== "token") return "signin";
  const msg = String(err.message || "");
  if (/revoked/.test(msg)) return "revoked";
  if (/expired/.test(msg)) return "expired";
  return "unknown";
}

// showGate opens the sign-in gate with the words of kind; detail is the
// server's own sentence, when it adds to them.
function showGate(kind, detail) {
  const d = $("token-dialog");
  if (d.open && kind === "signin" && (shown === "link" || shown === "pair")) return;
  shown = kind;
  const g = GATES[kind] || GATES.signin;
  $("token-heading").textContent = g.heading;
  const why = [g.why, detail].filter(Boolean).join(" ");
  $("token-why").textContent = why;
  $("token-why").hidden = !why;
  const steps = g.next.map((k) => {
    const [before, cmd, after] = NEXT[k];
    const p = el("p", "", before + " ");
    p.append(el("code", "", cmd), " " + after);
    return p;
  });
  $("token-next").replaceChildren(...steps);
  if (!d.open) d.showModal();
}

// askToken is the page's answer to a 401: the gate, or, after a pasted
// token, the server's sentence under the field.
function askToken(err) {
  if (tokenTried) {
    const msg = $("token-error");
    msg.textContent = err && err.message ? err.message : "The token was refused.";
    msg.hidden = false;
    if (!$("token-dialog").open) $("token-dialog").showModal();
  } else showGate(gateOf(err), err && err.body && err.body.field === "token" ? err.message : "");
  $("token-input").focus();
}

// redeemLoginLink logs the browser in from a login link: the code leaves
// the address bar and the history first, then is exchanged once for the
// login cookie. A used or expired code opens the gate saying so.
export async function redeemLoginLink() {
  if (location.pathname !== "/ui/login") return;
  const code = new URLSearchParams(location.hash.slice(1)).get("code");
  history.replaceState(null, "", "/ui");
  if (!code) return;
  try {
    await api.loginWithCode(code);
  } catch {
    showGate("link", "");
  }
}

// redeemPairing exchanges a pairing link's code for this device's login
// cookie before anything else talks to the bridge, removes it from the
// address so that a reload or a shared URL does not carry it, and greets
// the device with the next step.
export async function redeemPairing() {
  const m = location.hash.match(/^#pair=([A-Za-z0-9_-]+)$/);
  if (!m) return;
  history.replaceState(null, "", location.pathname + location.search);
  try {
    const res = await api.redeemPairing(m[1]);
    const device = (res && res.device) || "this device";
    localStorage.setItem(DEVICE_KEY, device);
    $("pair-heading").textContent = `Paired as “${device}”`;
    $("pair-text").textContent =
      "This device now has a sign-in of its own, which you can end from the computer (agent-bridge devices revoke). " +
      "Turn on notifications to hear when an agent asks you something while the app is closed.";
    $("pair-dialog").showModal();
  } catch {
    showGate("pair", "");
  }
}

// wireGate connects the gate's token field and the pairing greeting.
export function wireGate() {
  api.setUnauthorizedHandler(askToken);
  // Escape would close the gate and leave every request waiting for a
  // sign-in with no way to give one.
  $("token-dialog").addEventListener("cancel", (e) => e.preventDefault());
  $("token-form").addEventListener("submit", () => {
    $("token-error").hidden = true;
    tokenTried = true;
    api.login($("token-input").value.trim()).catch(askToken);
    $("token-input").value = "";
  });
  $("pair-done").addEventListener("click", () => $("pair-dialog").close());
}
