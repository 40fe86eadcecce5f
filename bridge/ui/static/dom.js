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

// waitText says how long a request that expires at exp (an RFC 3339 time)
// still waits for its answer.
export function waitText(exp) {
  const left = Math.max(0, Math.round((Date.parse(exp) - Date.now()) / 1000));
  return left > 0 ? `Waits ${left >= 120 ? Math.round(left / 60) + " min" : left + " s"} more for an answer` : "No longer waiting";
}
