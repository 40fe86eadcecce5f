// attachments.js: files in the thread (contract 8.2). The composer's
// attach button (a plain file input: on a phone it offers the camera, the
// photo library and files), pasting an image or dropping files onto the
// thread upload each file at once, as the raw body of POST
// /threads/{id}/attachments; the chips above the text box show them until
// the message that names them is sent. A message's files are shown under
// it: images inline, anything else as a chip that downloads it. The bridge
// sniffed each file's type from its bytes and serves it with nosniff and
// a sandboxing policy, so an <img> of it can only ever be an image. The
// files waiting are the open thread's (v.files), which the composer sends
// (shared.js pendingFiles) and forgets once sent ("sent"); a message's
// files are a part of its event (events.js asks for them: "parts").

import * as api from "./api.js";
import { $, el, button } from "./dom.js";
import { ui } from "./shared.js";
import { subscribe } from "./bus.js";

// INLINE are the types shown as pictures in the thread: the raster images
// the bridge's sniffer recognises.
const INLINE = ["image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/x-icon", "image/avif"];

// size writes a byte count for people: "812 bytes", "48 KB", "3.2 MB".
export function size(n) {
  if (!(n >= 0)) return "";
  if (n < 1000) return `${n} bytes`;
  if (n < 1000 * 1000) return `${Math.round(n / 1000)} KB`;
  return `${(n / 1000 / 1000).toFixed(1)} MB`;
}

// addFiles uploads each file to the open thread, one after another, and
// shows it among the files waiting to be sent.
async function addFiles(list) {
  const v = ui.view;
  if (!v || v.cursor !== null) return;
  for (const file of Array.from(list)) {
    const item = { name: file.name || pastedName(file.type), att: null, error: "" };
    v.files.push(item);
    renderPending();
    try {
      const path = `/threads/${encodeURIComponent(v.id)}/attachments?name=${encodeURIComponent(item.name)}`;
      item.att = (await api.post(path, file, { signal: v.ctrl.signal })).attachment;
    } catch (err) {
      item.error = err.message;
    }
    if (v === ui.view) renderPending();
  }
}

// pastedName names a pasted image, which comes without a file name.
function pastedName(type) {
  const ext = { "image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp" }[type] || "bin";
  return `pasted.${ext}`;
}

// renderPending draws the open thread's waiting files as chips, each with
// a button that takes it out.
function renderPending() {
  const list = $("attach-list");
  const items = ui.view ? ui.view.files : [];
  list.replaceChildren(
    ...items.map((it) => {
      const li = el("li", "attach-chip" + (it.error ? " failed" : it.att ? "" : " uploading"));
      if (it.att && INLINE.includes(it.att.type)) {
        const img = el("img", "attach-thumb");
        img.src = fileURL(it.att);
        img.alt = "";
        li.append(img);
      }
      const what = it.error ? `${it.name}: ${it.error}` : it.att ? `${it.name} · ${size(it.att.size)}` : `${it.name} · uploading…`;
      li.append(el("span", "attach-name", what));
      li.append(button("attach-remove", "×", () => {
        const all = ui.view.files;
        all.splice(all.indexOf(it), 1);
        renderPending();
      }, `Do not send ${it.name}`));
      return li;
    }),
  );
  list.hidden = items.length === 0;
}

// clearAttachments forgets v's waiting files, once sent.
function clearAttachments(v) {
  v.files = [];
  renderPending();
}

// fileURL is where the bridge serves an attachment (ids are checked:
// "sha256:" and hex, nothing to escape).
const fileURL = (a) => "/attachments/" + a.id;

// renderAttachments is the files an event names, to show under it: an
// image as itself (a tap opens it whole), anything else as a chip that
// downloads it; null when it names none.
function renderAttachments(ev) {
  const list = ev.meta && Array.isArray(ev.meta.attachments) ? ev.meta.attachments : [];
  const files = list.filter((a) => a && typeof a.id === "string" && /^sha256:[0-9a-f]{64}$/.test(a.id));
  if (!files.length) return null;
  const box = el("div", "attachments");
  for (const a of files) {
    const name = typeof a.name === "string" && a.name ? a.name : "file";
    if (INLINE.includes(a.type)) {
      const link = el("a", "attachment-image");
      link.href = fileURL(a);
      link.target = "_blank";
      link.rel = "noopener";
      link.title = `${name} · ${size(a.size)}`;
      const img = el("img");
      img.src = fileURL(a);
      img.alt = name;
      img.loading = "lazy";
      link.append(img);
      box.append(link);
      continue;
    }
    const chip = el("a", "file-chip");
    chip.href = fileURL(a);
    chip.download = name;
    chip.append(el("span", "file-name", name), el("span", "file-size", size(a.size)));
    box.append(chip);
  }
  return box;
}

// hasFiles reports whether a drag carries files.
const hasFiles = (dt) => !!dt && Array.from(dt.types || []).includes("Files");

// wireAttachments connects the attach button, pasting into the text box
// and dropping onto the thread.
export function wireAttachments() {
  const input = $("attach-input");
  input.addEventListener("change", () => {
    addFiles(input.files);
    input.value = "";
  });
  $("message-input").addEventListener("paste", (e) => {
    const files = e.clipboardData ? Array.from(e.clipboardData.files || []) : [];
    if (!files.length) return;
    e.preventDefault();
    addFiles(files);
  });
  const zone = $("thread-view");
  zone.addEventListener("dragover", (e) => {
    if (!hasFiles(e.dataTransfer)) return;
    e.preventDefault();
    zone.classList.add("dropping");
  });
  zone.addEventListener("dragleave", (e) => {
    if (!zone.contains(e.relatedTarget)) zone.classList.remove("dropping");
  });
  zone.addEventListener("drop", (e) => {
    zone.classList.remove("dropping");
    if (!hasFiles(e.dataTransfer)) return;
    e.preventDefault();
    addFiles(e.dataTransfer.files);
  });
}

subscribe("opened", renderPending);
subscribe("sent", ({ v }) => clearAttachments(v));
subscribe("parts", (d) => (d.files = renderAttachments(d.ev)));
