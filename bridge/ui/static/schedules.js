// schedules.js: the thread's schedules (contract 8.6), listed in the thread
// panel with what each posts and when it is next due. The section is made
// here and refreshed whenever the panel's state is (on opening a thread and
// after a control, such as a new schedule: "state").

import * as api from "./api.js";
import { el, fullTime } from "./dom.js";
import { ui } from "./shared.js";
import { subscribe } from "./bus.js";

let section, listEl;

// wireSchedules adds the Schedules section to the thread panel.
export function wireSchedules() {
  section = el("section", "schedules");
  section.id = "schedules";
  section.append(el("h3", "", "Schedules"));
  listEl = el("ul", "schedule-list");
  listEl.id = "schedule-list";
  section.append(listEl);
  document.getElementById("panel-sections").append(section);
}

// loadSchedules lists the schedules of v's thread.
async function loadSchedules(v) {
  if (!listEl || !v) return;
  let res;
  try {
    res = await api.get("/schedules?thread=" + encodeURIComponent(v.id), { signal: v.ctrl.signal });
  } catch {
    return; // an older bridge, or a token that may not list them
  }
  if (v !== ui.view) return;
  const items = (res.schedules || []).map((s) => {
    const li = el("li", "schedule");
    li.dataset.id = s.id;
    const text = typeof s.event.content === "string" ? s.event.content : JSON.stringify(s.event.content);
    const when = s.next ? "next " + fullTime(s.next) : "not due again";
    li.append(el("div", "schedule-when", `${s.id}: ${when}`), el("div", "schedule-what", `${s.cron} (${s.tz}) · to ${s.event.to}: ${text}`));
    return li;
  });
  if (!items.length) items.push(el("li", "schedule-none", "No schedules."));
  listEl.replaceChildren(...items);
}

subscribe("state", ({ v }) => loadSchedules(v));
