// composer.js: writing to the thread: the recipient, @-completion of
// invited ids and nicknames, Enter to send, replies and answers (a message's
// Reply and a question's Answer: "reply", "answer"), the files attachments.js
// keeps waiting, and the thread's errors ("thread-error").

import * as api from "./api.js";
import { $, el } from "./dom.js";
import { ui, sender, contentText, inThreadWords, scrollToBottom, pendingFiles } from "./shared.js";
import { publish, subscribe } from "./bus.js";

function showComposerError(msg) {
  const e = $("composer-error");
  e.textContent = msg;
  e.hidden = !msg;
}

function setReply(ev) {
  if (ui.view) ui.view.replyTo = ev ? ev.id : null;
  $("reply-indicator").hidden = !ev;
  $("reply-text").textContent = ev ? `Replying to ${ev.from}: ${contentText(ev).slice(0, 80)}` : "";
  if (ev) $("message-input").focus();
}

// answerQuestion replies to an agent's question, addressed to the asker.
function answerQuestion(ev) {
  setReply(ev);
  const sel = $("to-select");
  if (Array.from(sel.options).some((o) => o.value === ev.from)) sel.value = ev.from;
}

async function send() {
  const v = ui.view;
  if (!v || v.cursor !== null) return;
  const input = $("message-input");
  const text = input.value;
  const files = pendingFiles(v);
  if (files.busy) return showComposerError("A file is still uploading; send once it is done.");
  if (!text.trim() && !files.ready.length) return;
  const body = { from: sender(), to: $("to-select").value || "all", content: text.trim() ? text : files.ready.map((f) => f.name).join(", ") };
  if (v.replyTo) body.meta = { reply_to: v.replyTo };
  if (files.ready.length) body.meta = Object.assign(body.meta || {}, { attachments: files.ready });
  $("send-btn").disabled = true;
  // What one posts comes into view when the stream brings it: go to the
  // bottom now, not when the answer comes, which may be after the event
  // and after the viewer scrolled elsewhere.
  v.stick = true;
  scrollToBottom();
  try {
    const res = await api.post(`/threads/${encodeURIComponent(v.id)}/events`, body, { signal: v.ctrl.signal });
    if (v !== ui.view) return;
    input.value = "";
    publish("sent", { v });
    // Stored, but it wakes nobody (contract 6.4): say why, as the CLI does.
    showComposerError(res && res.ignored ? res.ignored.reason : "");
    setReply(null);
  } catch (err) {
    if (v === ui.view) showComposerError(inThreadWords(err.message, v.id));
  } finally {
    $("send-btn").disabled = v.cursor !== null;
  }
}

// Mention autocomplete over invited ids and nicknames.
let mention = null; // {start, end, items, index}

function mentionCandidates(prefix) {
  const st = ui.view && ui.view.liveState;
  const invited = (st && st.participants && st.participants.invited) || [];
  const p = prefix.toLowerCase();
  const out = [];
  for (const inv of invited) {
    const nick = (inv.profile && inv.profile.nickname) || "";
    // One entry per participant: the id when it matches (mentions resolve
    // ids first), else the nickname.
    let name = null;
    if (inv.id.toLowerCase().startsWith(p)) name = inv.id;
    else if (nick && nick.toLowerCase().startsWith(p)) name = nick;
    if (name) out.push({ name, id: inv.id, label: nick && nick !== inv.id ? `${inv.id} (${nick})` : inv.id });
  }
  return out;
}

function hideMention() {
  mention = null;
  $("mention-list").hidden = true;
}

function updateMention() {
  const input = $("message-input");
  const upto = input.value.slice(0, input.selectionStart);
  const m = upto.match(/(^|[\s(])@([\w.@:-]*)$/);
  const items = m ? mentionCandidates(m[2]) : [];
  if (!items.length) return hideMention();
  mention = { start: upto.length - m[2].length, end: input.selectionStart, items, index: 0 };
  renderMention();
}

function renderMention() {
  $("mention-list").replaceChildren(
    ...mention.items.map((it, i) => {
      const li = el("li", "mention" + (i === mention.index ? " selected" : ""), it.label);
      li.setAttribute("role", "option");
      li.addEventListener("mousedown", (e) => {
        e.preventDefault();
        mention.index = i;
        acceptMention();
      });
      return li;
    }),
  );
  $("mention-list").hidden = false;
}

function acceptMention() {
  const input = $("message-input");
  const it = mention.items[mention.index];
  const before = input.value.slice(0, mention.start);
  const after = input.value.slice(mention.end);
  input.value = before + it.name + " " + after;
  const pos = before.length + it.name.length + 1;
  input.setSelectionRange(pos, pos);
  hideMention();
}

function onComposerKey(e) {
  if (mention && !$("mention-list").hidden) {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      const n = mention.items.length;
      mention.index = (mention.index + (e.key === "ArrowDown" ? 1 : n - 1)) % n;
      renderMention();
      return;
    }
    if (e.key === "Enter" || e.key === "Tab") {
      e.preventDefault();
      acceptMention();
      return;
    }
    if (e.key === "Escape") return hideMention();
  }
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
}

// wireComposer connects the composer's form, keys and reply indicator.
export function wireComposer() {
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    send();
  });
  $("message-input").addEventListener("keydown", onComposerKey);
  $("message-input").addEventListener("input", updateMention);
  $("message-input").addEventListener("blur", hideMention);
  $("reply-cancel").addEventListener("click", () => setReply(null));
}

subscribe("opened", () => setReply(null));
subscribe("reply", ({ ev }) => setReply(ev));
subscribe("answer", ({ ev }) => answerQuestion(ev));
subscribe("thread-error", ({ message }) => showComposerError(message));
