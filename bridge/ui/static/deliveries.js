// deliveries.js: what became of the pushes to each device (contract 8.4),
// shown in the Notifications dialog under the choices: for each device the
// bridge lists (GET /devices, a person's), its last few pushes in plain
// words, newest first, so that a person whose phone stopped ringing sees
// why (its subscription expired, the push service refused it). A token
// that may not list devices shows nothing here.

import * as api from "./api.js";
import { $, el, fullTime, shortDate, timeOf } from "./dom.js";

// shown is how many pushes per device the dialog lists; the CLI's
// `agent-bridge devices --deliveries` lists all the bridge keeps.
const shown = 5;

export function wireDeliveries() {
  $("push-btn").addEventListener("click", () => showDeliveries());
}

// outcomeText says a delivery's outcome (sent, expired, failed: …) as a
// sentence.
function outcomeText(outcome) {
  if (outcome === "sent") return "Delivered to the push service.";
  if (outcome === "expired") return "Expired: the push service no longer knows this browser; turn notifications on there again.";
  const m = /^failed: (\d{3})$/.exec(outcome || "");
  if (m) return `Failed: the push service answered ${m[1]}.`;
  if (outcome === "failed: not a public address") return "Refused: the push endpoint is not on the internet.";
  if (outcome === "failed: unreachable") return "Failed: the push service could not be reached.";
  return outcome || "";
}

async function showDeliveries() {
  const box = $("push-deliveries");
  const list = $("push-deliveries-list");
  let devices;
  try {
    devices = (await api.get("/devices")).devices || [];
  } catch {
    box.hidden = true;
    return;
  }
  list.replaceChildren();
  for (const d of devices) {
    const pushes = (d.deliveries || []).slice(0, shown);
    if (pushes.length === 0) continue;
    const item = el("li", "push-device");
    item.append(el("div", "push-device-name", d.name));
    const lines = el("ul", "push-device-pushes");
    for (const p of pushes) {
      const line = el("li", "push-delivery " + p.outcome.split(":")[0]);
      line.dataset.outcome = p.outcome;
      const day = shortDate(p.at);
      const at = el("span", "push-delivery-at", day === timeOf(p.at) ? day : `${day} ${timeOf(p.at)}`);
      at.title = fullTime(p.at);
      line.append(at, " ", el("span", "push-delivery-what", outcomeText(p.outcome)));
      lines.append(line);
    }
    item.append(lines);
    list.append(item);
  }
  box.hidden = list.childElementCount === 0;
}
