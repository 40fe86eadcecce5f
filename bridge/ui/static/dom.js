// dom.js: the DOM and formatting helpers every module of the UI uses. Text
// only ever reaches the page through textContent, except for the sanitised
// Markdown of markdown.js.

// $ returns the element with the given id.
export const $ = (id) => document.getElementById(id);

// el creates an element with an optional class and text.
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

// button creates a type=button button that calls fn when clicked.
export function button(cls, text, fn, title) {
  const b = el("button", cls, text);
  b.type = "button";
  if (title) b.title = title;
  b.addEventListener("click", fn);
  return b;
}

// dayKey is a timestamp's local calendar day, "" when it is not a time.
export function dayKey(ts) {
  const d = new Date(ts);
  return isNaN(d) ? "" : d.toDateString();
}

// dayLabel names a local day for a date separator: Today, Yesterday, or
// the weekday and date.
export function dayLabel(ts) {
  const d = new Date(ts);
  if (isNaN(d)) return "";
  const today = new Date();
  const yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1);
  if (d.toDateString() === today.toDateString()) return "Today";
  if (d.toDateString() === yesterday.toDateString()) return "Yesterday";
  const opts = { weekday: "long", day: "numeric", month: "long" };
  if (d.getFullYear() !== today.getFullYear()) opts.year = "numeric";
  return d.toLocaleDateString(undefined, opts);
}

// timeOf is a timestamp's local time of day (hours and minutes).
export function timeOf(ts) {
  const d = new Date(ts);
  return isNaN(d) ? String(ts || "") : d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
}

// shortDate is a compact when for lists: the time today, the day and month
// this year, the full date before.
export function shortDate(ts) {
  const d = new Date(ts);
  if (isNaN(d)) return String(ts || "");
  const today = new Date();
  if (d.toDateString() === today.toDateString()) return timeOf(ts);
  const opts = { day: "numeric", month: "short" };
  if (d.getFullYear() !== today.getFullYear()) opts.year = "numeric";
  return d.toLocaleDateString(undefined, opts);
}

// fullTime is a timestamp as the local date and time, for tooltips.
export function fullTime(ts) {
  const d = new Date(ts);
  return isNaN(d) ? String(ts || "") : d.toLocaleString();
}
