// Receipts: under each addressed message, one line per participant the
// coordinator considered, saying what became of it (docs/runs.md). The
// lines are built here from the receipts (GET /threads/{id}/receipts, then
// "event: receipt" on the thread's stream) and the participants' presence,
// whose details.status says what a running agent is doing.

const ENDED = {
  succeeded: "replied",
  passed: "passed",
  failed: "failed",
  timeout: "timed out",
  cancelled: "cancelled",
  refused: "reply refused (muted or paused meanwhile)",
  interrupted: "interrupted",
};

// receiptText is one line's text, without the participant's name. now is
// Date.now(); presence is the participant's presence entry, if any.
export function receiptText(r, presence, now) {
  switch (r.state) {
    case "queued":
      return "queued";
    case "running": {
      const started = Date.parse(r.updated_at);
      let text = "running";
      if (!isNaN(started)) text += ` ${Math.max(0, Math.round((now - started) / 1000))} s`;
      const d = presence && !presence.stale && presence.state === "thinking" && presence.details;
      if (d && typeof d.status === "string" && d.status) text += " · " + d.status;
      return text;
    }
    case "skipped":
      return "not invoked" + (r.reason ? " — " + r.reason : "");
    default:
      return ENDED[r.state] || r.state;
  }
}

// drawReceipts fills box (a message's receipt area) with one line per
// receipt of byParticipant (a Map), sorted by participant. label(id) gives
// a participant's display name; onReply(id) shows a reply.
export function drawReceipts(box, byParticipant, presence, label, onReply, now) {
  const list = byParticipant ? Array.from(byParticipant.values()) : [];
  list.sort((a, b) => (a.participant < b.participant ? -1 : a.participant > b.participant ? 1 : 0));
  box.hidden = list.length === 0;
  const lines = [];
  for (const r of list) {
    const line = document.createElement("div");
    line.className = "receipt receipt-" + String(r.state).replace(/[^a-z]/g, "");
    line.dataset.participant = r.participant;
    line.dataset.state = r.state;
    const text = `${label(r.participant)}: ${receiptText(r, presence.get(r.participant), now)}`;
    if (r.reply && onReply) {
      const a = document.createElement("button");
      a.type = "button";
      a.className = "receipt-link";
      a.textContent = text;
      a.title = "Show the " + (r.state === "succeeded" ? "reply" : "notice");
      a.addEventListener("click", () => onReply(r.reply));
      line.append(a);
    } else {
      line.textContent = text;
    }
    lines.push(line);
  }
  box.replaceChildren(...lines);
}
