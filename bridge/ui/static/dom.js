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

// Formatters are built once: building one per call (toLocaleTimeString
// with options does) costs more than drawing the event it is for.
const TIME = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const FULL = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
const DAY_MONTH = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short" });
const DAY_MONTH_YEAR = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short", year: "numeric" });
const WEEKDAY = new Intl.DateTimeFormat(undefined, { weekday: "long", day: "numeric", month: "long" });
const WEEKDAY_YEAR = new Intl.DateTimeFormat(undefined, { weekday: "long", day: "numeric", month: "long", year: "numeric" });

const parse = (ts) => {
  const d = new Date(ts);
  return isNaN(d) ? null : d;
};
const sameDay = (a, b) => a.getFullYear() === b.getFullYear() && a.getMonth() === b.getMonth() && a.getDate() === b.getDate();

// dayKey is a timestamp's local calendar day, "" when it is not a time.
export function dayKey(ts) {
  const d = parse(ts);
  return d ? `${d.getFullYear()}-${d.getMonth() + 1}-${d.getDate()}` : "";
}

// dayLabel names a local day for a date separator: Today, Yesterday, or
// the weekday and date.
export function dayLabel(ts) {
  const d = parse(ts);
  if (!d) return "";
  const today = new Date();
  if (sameDay(d, today)) return "Today";
  if (sameDay(d, new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1))) return "Yesterday";
  return (d.getFullYear() === today.getFullYear() ? WEEKDAY : WEEKDAY_YEAR).format(d);
}

// timeOf is a timestamp's local time of day (hours and minutes).
export function timeOf(ts) {
  const d = parse(ts);
  return d ? TIME.format(d) : String(ts || "");
}

// shortDate is a compact when for lists: the time today, the day and month
// this year, the full date before.
export function shortDate(ts) {
  const d = parse(ts);
  if (!d) return String(ts || "");
  const today = new Date();
  if (sameDay(d, today)) return TIME.format(d);
  return (d.getFullYear() === today.getFullYear() ? DAY_MONTH : DAY_MONTH_YEAR).format(d);
}

// fullTime is a timestamp as the local date and time, for tooltips.
export function fullTime(ts) {
  const d = parse(ts);
  return d ? FULL.format(d) : String(ts || "");
}

// ICONS are the UI's icons, 24×24 SVG paths drawn in the current colour.
const ICONS = {
  menu: "M3 6h18v2H3zm0 5h18v2H3zm0 5h18v2H3z",
  more: "M12 8a2 2 0 1 0 0-4 2 2 0 0 0 0 4zm0 2a2 2 0 1 0 0 4 2 2 0 0 0 0-4zm0 6a2 2 0 1 0 0 4 2 2 0 0 0 0-4z",
  people: "M16 11a3 3 0 1 0 0-6 3 3 0 0 0 0 6zm-8 0a3 3 0 1 0 0-6 3 3 0 0 0 0 6zm0 2c-2.3 0-7 1.2-7 3.5V19h14v-2.5C15 14.2 10.3 13 8 13zm8 0c-.3 0-.6 0-1 .1 1.2.8 2 2 2 3.4V19h6v-2.5c0-2.3-4.7-3.5-7-3.5z",
  send: "M3 20.5 21 12 3 3.5V10l12 2-12 2z",
  close: "M6.4 5 5 6.4 10.6 12 5 17.6 6.4 19 12 13.4 17.6 19 19 17.6 13.4 12 19 6.4 17.6 5 12 10.6z",
  left: "M20 11H7.8l5.6-5.6L12 4l-8 8 8 8 1.4-1.4L7.8 13H20z",
  right: "M4 11h12.2l-5.6-5.6L12 4l8 8-8 8-1.4-1.4 5.6-5.6H4z",
  reply: "M10 9V5l-7 7 7 7v-4.1c5 0 8.5 1.6 11 5.1-1-5-4-10-11-11z",
};

// icon returns an icon as a span holding its SVG, hidden from screen
// readers: the button that holds it has the words (aria-label).
export function icon(name) {
  const span = el("span", "icon");
  span.append(iconSVG(name));
  return span;
}

function iconSVG(name) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", ICONS[name] || "");
  svg.append(path);
  return svg;
}

// fillIcons draws the icons the page's HTML names (<span class="icon"
// data-icon="menu">).
export function fillIcons(root) {
  for (const span of root.querySelectorAll(".icon[data-icon]")) {
    if (!span.firstChild) span.append(iconSVG(span.dataset.icon));
  }
}

// waitText says how long a request that expires at exp (an RFC 3339 time)
// still waits for its answer.
export function waitText(exp) {
  const left = Math.max(0, Math.round((Date.parse(exp) - Date.now()) / 1000));
  return left > 0 ? `Waits ${left >= 120 ? Math.round(left / 60) + " min" : left + " s"} more for an answer` : "No longer waiting";
}
