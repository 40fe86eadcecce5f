// panel.js: the thread panel: the thread's state and its switches, the
// participants with their presence and actions, the scene header and the
// invite form. Everything here posts control events as the viewer, the
// other views' too ("control"). It draws the state shared.js loads
// ("state"), and says when it drew ("panel-drawn").

import * as api from "./api.js";
import { $, el } from "./dom.js";
import { ui, sender, inThreadWords, loadState } from "./shared.js";
import { partyText } from "./controls.js";
import { publish, subscribe } from "./bus.js";

function renderPanel(v) {
  const st = v.state || {};
  const muted = new Set([...(st.muted || []), ...(st.soft_muted || [])]);
  const disc = st.discussion || {};
  const auto = st.invited_auto || {};
  const invited = (st.participants && st.participants.invited) || [];
  $("ctl-pause").checked = !!st.paused;
  $("ctl-discussion").checked = !!disc.on;
  $("ctl-agent-mentions").checked = !!disc.allow_agent_mentions;
  $("ctl-auto").checked = !!auto.on;
  const party = st.party || {};
  $("ctl-party").checked = !!party.on;
  if (document.activeElement !== $("ctl-party-max")) $("ctl-party-max").value = party.max_agents || 2;
  $("ctl-party-cross").checked = party.cross_talk !== false;
  const summary = [];
  if (st.paused) summary.push("paused");
  if (disc.on) summary.push("discussion on");
  if (auto.on) summary.push("auto-reply on");
  if (party.on) summary.push(`party on (${partyText(party)})`);
  if (muted.size) summary.push("muted: " + [...muted].join(", "));
  summary.push(`${invited.length} invited`);
  const asOf = v.cursor === null ? "live" : `as of version ${v.cursor}`;
  $("state-summary").textContent = `${summary.join(" · ")} (${asOf})`;

  // Participants are updated in place, keyed by id, so a refresh never
  // swaps a button out from under a click.
  const list = $("participant-list");
  const keep = new Set(invited.map((p) => p.id));
  for (const li of Array.from(list.children)) if (!keep.has(li.dataset.id)) li.remove();
  let prev = null;
  for (const p of invited) {
    let li = list.querySelector(`.participant[data-id="${CSS.escape(p.id)}"]`);
    if (!li) li = participantNode(p.id, v.cursor !== null);
    updateParticipant(li, p, muted.has(p.id));
    const want = prev ? prev.nextSibling : list.firstChild;
    if (want !== li) list.insertBefore(li, want);
    prev = li;
  }
  renderScene(v);
  renderRecipients(v);
  publish("panel-drawn", { v });
}

// renderScene shows the thread's scene, if it ever had one, above the
// events: status, each actor's turns (the next speaker in bold) and caps.
function renderScene(v) {
  const sc = (v.state || {}).scene;
  const box = $("scene-header");
  box.hidden = !sc;
  if (!sc) return;
  let status = `Scene ${sc.status}`;
  if (sc.close_reason) status += ` (${sc.close_reason})`;
  $("scene-status").textContent = status;
  const actors = $("scene-actors");
  actors.textContent = "";
  for (const a of sc.actors || []) {
    const span = el("span", "scene-actor", `${a}: ${(sc.turns || {})[a] || 0} turns`);
    span.dataset.actor = a;
    if (sc.on && sc.next === a) span.classList.add("next");
    actors.append(span);
  }
  $("scene-caps").textContent = `soft cap ${sc.soft_cap} · hard cap ${sc.hard_cap} per actor`;
}

// participantNode is a participant's entry; its buttons are disabled while
// the thread is viewed as of an earlier version (past), as revision.js
// disables everything that would post.
function participantNode(id, past) {
  const li = el("li", "participant");
  li.dataset.id = id;
  const top = el("div", "p-top");
  const dot = el("span", "presence");
  dot.dataset.id = id;
  // p-host is where the agent runs ("@ laptop"), from the presence its
  // coordinator reports (renderPresence).
  top.append(dot, el("span", "p-name"), el("span", "p-host"), el("span", "badge badge-muted", "muted"));
  const btns = el("div", "p-actions");
  const mk = (label, cls, fn) => {
    const b = el("button", cls, label);
    b.type = "button";
    b.disabled = past;
    b.addEventListener("click", fn);
    btns.append(b);
    return b;
  };
  mk("Mute", "mute", () => control({ mute: { targets: [id], mode: "hard" } }));
  mk("Unmute", "unmute", () => control({ unmute: { targets: [id] } }));
  mk("Prod", "prod", () => control({ prod: [id] }));
  mk("Uninvite", "uninvite", () => control({ uninvite: { participant_id: id } }));
  // Stop cancels the participant's running and queued invocations here;
  // renderPresence shows it only while the participant is thinking.
  mk("Stop", "stop btn-danger", () => control({ cancel: { participant_id: id } })).hidden = true;
  li.append(top, el("div", "p-detail"), el("div", "p-expertise"), el("div", "p-state"), btns);
  return li;
}

function updateParticipant(li, p, muted) {
  const prof = p.profile || {};
  const set = (sel, text) => {
    const e = li.querySelector(sel);
    if (e.textContent !== text) e.textContent = text;
  };
  set(".p-name", prof.nickname ? `${prof.nickname} (${p.id})` : p.id);
  const roles = (prof.roles || []).join(", ");
  set(".p-detail", [prof.client, prof.model].filter(Boolean).join(" / ") + (roles ? " · " + roles : ""));
  const expertise = (prof.expertise || []).join(", ");
  set(".p-expertise", expertise ? "knows: " + expertise : "");
  li.querySelector(".p-expertise").hidden = !expertise;
  li.querySelector(".badge-muted").hidden = !muted;
  li.querySelector("button.mute").hidden = muted;
  li.querySelector("button.unmute").hidden = !muted;
}

// renderRecipients fills the `to` dropdown with everyone invited (online or
// not), keeping the current choice when it is still there.
function renderRecipients(v) {
  const st = v.liveState || {};
  const sel = $("to-select");
  const cur = sel.value;
  const ids = ["all", ...((st.participants && st.participants.invited) || []).map((p) => p.id)];
  if (ids.join("\n") === Array.from(sel.options).map((o) => o.value).join("\n")) return;
  const opts = ids.map((id) => {
    const o = el("option", null, id === "all" ? "everyone" : id);
    o.value = id;
    return o;
  });
  if (cur && !ids.includes(cur)) {
    const o = el("option", null, cur);
    o.value = cur;
    opts.push(o);
  }
  sel.replaceChildren(...opts);
  sel.value = cur || "all";
}

// control posts a control event as the viewer and reads the state back.
async function control(content) {
  const v = ui.view;
  if (!v || v.cursor !== null) return;
  $("control-error").hidden = true;
  try {
    const res = await api.post(`/threads/${encodeURIComponent(v.id)}/events`, { type: "control", from: sender(), content }, { signal: v.ctrl.signal });
    // Stored, but it changes nothing (contract 6.4): say why.
    if (res && res.ignored && v === ui.view) {
      showControlError(res.ignored.reason);
      publish("control-ignored", { content, reason: res.ignored.reason });
    }
  } catch (err) {
    if (v === ui.view) {
      showControlError(inThreadWords(err.message, v.id));
      publish("control-ignored", { content, reason: err.message });
    }
  }
  if (v === ui.view) loadState(v);
}

function showControlError(msg) {
  const e = $("control-error");
  e.textContent = msg;
  e.hidden = false;
}

// ------------------------------------------------------------------ invite

let idEdited = false;

function suggestID() {
  if (idEdited) return;
  const base = ($("inv-nickname").value.trim() || $("inv-client").value.trim() || "agent")
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[^a-z0-9]+/, "")
    .slice(0, 60) || "agent";
  const st = ui.view && ui.view.liveState;
  const taken = new Set(((st && st.participants && st.participants.invited) || []).map((p) => p.id));
  let id = base;
  for (let i = 2; taken.has(id); i++) id = `${base}-${i}`;
  $("inv-id").value = id;
}

async function invite() {
  const profile = { client: $("inv-client").value.trim(), model: $("inv-model").value.trim() };
  const nick = $("inv-nickname").value.trim();
  if (nick) profile.nickname = nick;
  const roles = $("inv-roles").value.split(",").map((r) => r.trim()).filter(Boolean);
  if (roles.length) profile.roles = roles;
  const character = $("inv-character").value.trim();
  if (character) profile.character = character;
  const expertise = $("inv-expertise").value.split(",").map((r) => r.trim()).filter(Boolean);
  if (expertise.length) profile.expertise = expertise;
  const id = $("inv-id").value.trim();
  await control({ invite: { participant_id: id, profile } });
  if ($("control-error").hidden) {
    $("invite-form").reset();
    idEdited = false;
  }
}

// wirePanel connects the panel's switches and the invite form.
export function wirePanel() {
  $("ctl-pause").addEventListener("change", (e) => control({ pause: { on: e.target.checked } }));
  const disc = () => control({ discussion: { on: $("ctl-discussion").checked, allow_agent_mentions: $("ctl-agent-mentions").checked } });
  $("ctl-discussion").addEventListener("change", () => {
    $("ctl-agent-mentions").checked = $("ctl-discussion").checked;
    disc();
  });
  $("ctl-agent-mentions").addEventListener("change", disc);
  $("ctl-auto").addEventListener("change", (e) => control({ invited_auto: { on: e.target.checked } }));
  // The party's settings apply when it is switched on, and again when one
  // changes while it is on.
  const party = () => {
    if (!$("ctl-party").checked) return control({ party: { on: false } });
    const max = Math.min(16, Math.max(1, Number($("ctl-party-max").value) || 2));
    return control({ party: { on: true, max_agents: max, cross_talk: $("ctl-party-cross").checked } });
  };
  $("ctl-party").addEventListener("change", party);
  $("ctl-party-max").addEventListener("change", () => $("ctl-party").checked && party());
  $("ctl-party-cross").addEventListener("change", () => $("ctl-party").checked && party());

  $("inv-client").addEventListener("input", suggestID);
  $("inv-nickname").addEventListener("input", suggestID);
  $("inv-id").addEventListener("input", () => {
    idEdited = $("inv-id").value.trim() !== "";
  });
  $("invite-form").addEventListener("submit", (e) => {
    e.preventDefault();
    invite();
  });
}

subscribe("state", ({ v, error }) => (error ? showControlError(error) : renderPanel(v)));
subscribe("control", ({ content }) => control(content));
