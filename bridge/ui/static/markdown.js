// markdown.js: message content as Markdown (CommonMark with GitHub's
// tables, task lists, strikethrough and autolinks) through marked, and the
// HTML it makes through DOMPurify, both vendored from npm (vendor/README.md).
//
// Raw HTML typed into a message is shown as text, not interpreted: agents
// quote HTML often and mean it literally. Images become links (the page's
// CSP would block a foreign image anyway, and loading one would tell its
// host who reads the thread). Links open in a new tab and only http(s) and
// mailto links stay links. DOMPurify runs last, so even a mistake in these
// rules cannot put a script or an event handler on the page.

import { Marked } from "./vendor/marked.esm.js";
import DOMPurify from "./vendor/purify.es.js";

const escapeHTML = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

const linkable = (href) => safeURL(href) !== null || /^mailto:/i.test(String(href));

const marked = new Marked({
  gfm: true,
  // A line break in a chat message is meant as one.
  breaks: true,
  renderer: {
    html(token) {
      return escapeHTML(token.text);
    },
    link(token) {
      // A link to anything but http(s) or mailto is shown as typed.
      return linkable(token.href) ? false : escapeHTML(token.raw);
    },
    image(token) {
      const label = token.text || token.href;
      if (!linkable(token.href)) return escapeHTML(token.raw);
      return `<a href="${escapeHTML(token.href)}">${escapeHTML(label)}</a>`;
    },
  },
});

const PURIFY = {
  FORBID_TAGS: ["style", "img", "svg", "math", "form", "button", "textarea", "select", "iframe"],
  // Inline styles would break the page's CSP (style-src 'self').
  FORBID_ATTR: ["style", "class", "id"],
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i,
  RETURN_DOM_FRAGMENT: true,
};

// safeURL returns the normalised URL when it is http or https, else null.
function safeURL(raw) {
  let u;
  try {
    u = new URL(raw);
  } catch {
    return null;
  }
  return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
}

// PLAIN matches text in which Markdown would find nothing to do: no
// emphasis, code, link, HTML, entity, heading, quote, list, table, rule or
// indented code. Most chat lines are like that; they skip the parser and
// the sanitiser (built with textContent, which is as inert), which keeps a
// burst of live events and the opening of a thread fast.
const PLAIN = /[*_`[\]<>#|~\\!&]|https?:|www\.|@|^\s*(?:[-+]|\d+[.)])(?:\s|$)|^\s*>|^(?: {4}|\t)|^\s*(?:=+|-+)\s*$/m;

function renderPlain(text) {
  const wrap = document.createElement("div");
  wrap.className = "md";
  for (const para of String(text).trim().split(/\n[ \t]*\n\s*/)) {
    const p = document.createElement("p");
    para.split("\n").forEach((line, i) => {
      if (i) p.append(document.createElement("br"));
      p.append(line);
    });
    wrap.append(p);
  }
  return wrap;
}

// renderMarkdown turns untrusted text into a sanitised fragment.
export function renderMarkdown(text) {
  if (!PLAIN.test(String(text))) return renderPlain(text);
  const html = marked.parse(String(text), { async: false }).trim();
  const frag = DOMPurify.sanitize(html, PURIFY);
  for (const code of frag.querySelectorAll("pre > code")) {
    // marked ends a code block with its last newline.
    const last = code.lastChild;
    if (last && last.nodeType === Node.TEXT_NODE && last.data.endsWith("\n")) last.data = last.data.slice(0, -1);
  }
  for (const a of frag.querySelectorAll("a")) {
    const href = a.getAttribute("href") || "";
    if (!linkable(href)) {
      // A link whose target was refused keeps its words, as text.
      a.replaceWith(document.createTextNode(a.textContent));
      continue;
    }
    a.target = "_blank";
    a.rel = "noopener noreferrer";
  }
  for (const box of frag.querySelectorAll('input[type="checkbox"]')) box.disabled = true;
  for (const pre of frag.querySelectorAll("pre")) addCopyButton(pre);
  const wrap = document.createElement("div");
  wrap.className = "md";
  wrap.append(frag);
  return wrap;
}

// addCopyButton puts a Copy button on a code block that copies its text.
function addCopyButton(pre) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "copy-btn";
  b.textContent = "Copy";
  b.title = "Copy the code to the clipboard";
  b.addEventListener("click", async () => {
    const code = pre.querySelector("code");
    const text = (code || pre).textContent;
    try {
      await navigator.clipboard.writeText(text);
      b.textContent = "Copied";
    } catch {
      b.textContent = "Copy failed";
    }
    setTimeout(() => (b.textContent = "Copy"), 1500);
  });
  pre.classList.add("has-copy");
  pre.prepend(b);
}
