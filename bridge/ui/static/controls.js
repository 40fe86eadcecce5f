// controls.js: one sentence for every control event, from one table. The
// sentence follows the sender's name in the event's header ("user" —
// "paused the thread"). bridge/ui's tests check that every control key the
// bridge's fold knows (agentbridge.ParseControl) has an entry here, and the
// browser tests render each one.

const list = (ids) => {
  const a = (Array.isArray(ids) ? ids : []).map(String);
  if (a.length <= 1) return a.join("");
  return a.slice(0, -1).join(", ") + " and " + a[a.length - 1];
};
const on = (v) => !!(v && v.on);
const pid = (v) => String((v && v.participant_id) || "someone");

// partyText words party settings: how many agents, from whom, reactions.
export function partyText(p) {
  const agents = Array.isArray(p.agents) && p.agents.length ? list(p.agents) : "everyone";
  const max = p.max_agents || 2;
  return `up to ${max} of ${agents}, ${p.cross_talk === false ? "no reactions" : "with reactions"}`;
}

// CONTROL_SENTENCES maps a control key to a function of its value and a
// context ({name(id), option(eventID, optionID)}) returning the sentence.
export const CONTROL_SENTENCES = {
  invite: (v, c) => {
    const p = (v && v.profile) || {};
    const what = [p.client, p.model].filter(Boolean).join(" / ");
    const nick = p.nickname ? `${p.nickname}, ` : "";
    return `invited ${pid(v)} (${nick}${what})`;
  },
  uninvite: (v, c) => `uninvited ${c.name(pid(v))}`,
  mute: (v, c) => `muted ${list(((v && v.targets) || []).map(c.name))}` + (v && v.mode === "soft" ? " (softly: they may still read)" : ""),
  unmute: (v, c) => `unmuted ${list(((v && v.targets) || []).map(c.name))}`,
  pause: (v) => (on(v) ? "paused the thread" : "resumed the thread"),
  discussion: (v) =>
    on(v)
      ? "turned discussion mode on" + (v.allow_agent_mentions === false ? " (only people’s mentions wake agents)" : " (agents may mention each other)")
      : "turned discussion mode off",
  invited_auto: (v) => `turned invited auto-reply ${on(v) ? "on" : "off"}`,
  prod: (v, c) => `prodded ${list((Array.isArray(v) ? v : []).map(c.name))}`,
  party: (v) => (on(v) ? `turned party mode on (${partyText(v)})` : "turned party mode off"),
  scene: (v, c) => {
    if (!on(v)) return "closed the scene";
    const actors = list(((v && v.actors) || []).map(c.name));
    return actors ? `started a scene with ${actors}` : "started a scene";
  },
  cancel: (v, c) => `stopped ${c.name(pid(v))}’s runs in this thread`,
  reset_session: (v, c) => `reset ${c.name(pid(v))}’s session: its next run starts afresh`,
  permission: (v, c) => {
    const ev = String((v && v.event) || "");
    const opt = String((v && v.option) || "");
    return `answered a permission request: ${c.option(ev, opt) || opt || "no option"}`;
  },
  workspace: (v) => (v && v.name ? `set the thread’s workspace to ${v.name}` : "set the thread’s agents back to their own workspaces"),
  change: (v, c) => {
    if (v && v.merge) return `asked to merge ${c.name(v.merge.participant)}’s change` + (v.merge.into ? ` into ${v.merge.into}` : "") + (v.merge.squash ? ", squashed" : "");
    if (v && v.discard) return `asked to discard ${c.name(v.discard.participant)}’s change`;
    return "sent a change control";
  },
  schedule: (v, c) => {
    const id = String((v && v.id) || "");
    if (v && v.off) return `turned schedule ${id} off`;
    const to = (v && v.event && v.event.to) || "all";
    return `scheduled ${id} (${String((v && v.cron) || "")}, ${String((v && v.tz) || "UTC")}) to ${c.name(to)}`;
  },
  answer: (v) => {
    if (v && v.action === "decline") return "declined a question";
    const fields = v && v.fields && typeof v.fields === "object" ? Object.entries(v.fields) : [];
    const said = fields.map(([k, x]) => `${k} “${Array.isArray(x) ? x.join(", ") : String(x)}”`);
    return said.length ? `answered a question: ${said.join(", ")}` : "answered a question";
  },
};

// describeControl is the sentence for a control event's content (an object,
// or a string holding one, as the original UI sends). A key without an
// entry (a newer control) is named, never shown as JSON.
export function describeControl(content, ctx) {
  let c = content;
  if (typeof c === "string") {
    try {
      c = JSON.parse(c);
    } catch {
      return "sent a control that is not JSON";
    }
  }
  if (!c || typeof c !== "object" || Array.isArray(c)) return "sent a control that is not an object";
  const full = Object.assign({ name: (id) => id, option: () => "" }, ctx || {});
  const parts = [];
  for (const [k, v] of Object.entries(c)) {
    const f = Object.hasOwn(CONTROL_SENTENCES, k) ? CONTROL_SENTENCES[k] : null;
    parts.push(f ? f(v, full) : `sent the control “${k}”`);
  }
  return parts.length ? parts.join("; ") : "sent an empty control";
}
