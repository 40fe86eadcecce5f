// markdown.js: a deliberately small markdown subset for untrusted text.
// Everything is built with createElement and textContent (no HTML parsing),
// so event content can only ever become text, code blocks or http(s) links.

const INLINE = /`([^`\n]+)`|\[([^\]\n]+)\]\(([^()\s]+)\)|(https?:\/\/[^\s<>"'`]+)/g;

// safeURL returns the normalised URL when it is http or https, else null.
export function safeURL(raw) {
  let u;
  try {
    u = new URL(raw);
  } catch {
    return null;
  }
  return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
}

function link(href, text) {
  const a = document.createElement("a");
  a.href = href;
  a.target = "_blank";
  a.rel = "noopener noreferrer";
  a.textContent = text;
  return a;
}

// renderInline appends text with inline code spans and safe links to parent.
function renderInline(parent, text) {
  let last = 0;
  INLINE.lastIndex = 0;
  for (let m; (m = INLINE.exec(text)); ) {
    if (m.index > last) parent.append(text.slice(last, m.index));
    let end = m.index + m[0].length;
    if (m[1] !== undefined) {
      const code = document.createElement("code");
      code.textContent = m[1];
      parent.append(code);
    } else if (m[2] !== undefined) {
      const href = safeURL(m[3]);
      parent.append(href ? link(href, m[2]) : m[0]);
    } else {
      let url = m[4];
      const trail = url.match(/[.,;:!?)\]]+$/);
      if (trail) {
        url = url.slice(0, -trail[0].length);
        end -= trail[0].length;
        INLINE.lastIndex = end;
      }
      const href = safeURL(url);
      parent.append(href ? link(href, url) : url);
    }
    last = end;
  }
  if (last < text.length) parent.append(text.slice(last));
}

// renderMarkdown turns text into a fragment of paragraphs (newlines kept),
// fenced code blocks, inline code and links.
export function renderMarkdown(text) {
  const frag = document.createDocumentFragment();
  const lines = String(text).split("\n");
  let prose = [];
  const flush = () => {
    if (!prose.length) return;
    const p = document.createElement("div");
    p.className = "md-text";
    renderInline(p, prose.join("\n"));
    frag.append(p);
    prose = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const open = lines[i].match(/^\s*```\s*([\w+#.-]*)\s*$/);
    if (!open) {
      prose.push(lines[i]);
      continue;
    }
    flush();
    const code = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) code.push(lines[i]);
    const pre = document.createElement("pre");
    const c = document.createElement("code");
    if (open[1]) c.dataset.lang = open[1];
    c.textContent = code.join("\n");
    pre.append(c);
    frag.append(pre);
  }
  flush();
  return frag;
}
