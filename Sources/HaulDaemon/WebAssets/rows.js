"use strict";

// One list row per download, made once and updated in place on every refresh. Its buttons
// carry data-action and its checkbox selects it; the list handles both (app.js).
const Rows = (() => {
  const { el, icon, setText, setAttr, iconButton } = Dom;

  function make(gid, animate) {
    const li = el("li", "dl");
    li.dataset.gid = gid;
    if (animate) {
      li.classList.add("enter");
      li.addEventListener("animationend", () => li.classList.remove("enter"), { once: true });
    }
    const sel = el("input", "sel");
    sel.type = "checkbox";
    const ico = el("div", "ico");
    ico.setAttribute("aria-hidden", "true");
    const body = el("div", "body");
    const line1 = el("div", "line1");
    const name = el("span", "name");
    const badge = el("span", "badge");
    line1.append(name, badge);
    const bar = el("div", "bar");
    bar.setAttribute("role", "progressbar");
    bar.setAttribute("aria-valuemin", "0");
    bar.setAttribute("aria-valuemax", "100");
    const fill = el("div", "fill");
    bar.append(fill);
    const meta = el("div", "meta");
    const pct = el("span", "pct"), size = el("span", "size"), spd = el("span", "spd"), eta = el("span", "eta");
    // In a fleet, the daemon that holds it.
    const daemon = el("span", "daemon");
    meta.append(pct, size, spd, eta, daemon);
    const err = el("div", "err");
    const errText = el("span");
    err.append(icon("warn", 13), errText);
    err.hidden = true;
    body.append(line1, bar, meta, err);
    const ops = el("div", "ops");
    li.append(sel, ico, body, ops);
    return { el: li, sel, ico, name, badge, bar, fill, pct, size, spd, eta, daemon, err, errText, ops, data: null, iconFor: "", opsFor: "" };
  }

  // The buttons a download in `status` offers; moving only where the queue order is shown.
  function buttons(status, canMove) {
    const list = [];
    if (status === "active" || status === "waiting") list.push(["pause", "pause", "Pause"]);
    if (status === "paused") list.push(["resume", "play", "Resume"]);
    if (status === "error") list.push(["retry", "retry", "Retry"]);
    if (canMove && (status === "waiting" || status === "paused")) {
      list.push(["up", "up", "Move up"], ["down", "down", "Move down"]);
    }
    list.push(["details", "info", "Details"]);
    list.push(Fmt.isStopped(status) ? ["remove", "x", "Remove from list", true] : ["remove", "x", "Cancel download", true]);
    return list;
  }

  function update(row, d, canMove) {
    row.data = d;
    const li = row.el, status = String(d.status || "waiting");
    const p = Fmt.percentOf(d);
    const total = Fmt.num(d.totalLength), done = Fmt.num(d.completedLength), rate = Fmt.num(d.downloadSpeed);
    setAttr(li, "data-status", status);
    setAttr(li, "data-percent", p);
    if (row.iconFor !== status) {
      row.iconFor = status;
      row.ico.replaceChildren(icon(status, 18));
    }
    const name = Fmt.nameOf(d);
    setText(row.name, name);
    setAttr(row.name, "title", Fmt.path(d) || Fmt.firstUri(d) || name);
    setText(row.badge, Fmt.STATUS_LABEL[status] || status);

    const w = p + "%";
    if (row.fill.style.width !== w) row.fill.style.width = w;
    setAttr(row.bar, "aria-valuenow", p);
    setAttr(row.bar, "aria-label", name + " progress");
    setText(row.pct, p + "%");

    if (status === "complete") setText(row.size, Fmt.bytes(total || done));
    else if (total) setText(row.size, Fmt.bytes(done) + " of " + Fmt.bytes(total));
    else setText(row.size, done ? Fmt.bytes(done) : "");
    if (status === "active") {
      setText(row.spd, Fmt.speed(rate));
      setText(row.eta, rate > 0 && total > 0 ? Fmt.duration((total - done) / rate) + " left" : total ? "—" : "");
    } else {
      setText(row.spd, "");
      // Paused says so in its badge.
      setText(row.eta, status === "waiting" ? Fmt.waitText(d) : "");
      // Compact rows cut it short.
      setAttr(row.eta, "title", row.eta.textContent);
    }

    setText(row.daemon, d.daemon ? "on " + d.daemon : "");

    const showErr = status === "error";
    if (showErr) setText(row.errText, Fmt.errorText(d));
    if (row.err.hidden === showErr) row.err.hidden = !showErr;

    const opsFor = status + (canMove ? ":move" : "");
    if (row.opsFor !== opsFor) {
      row.opsFor = opsFor;
      row.ops.replaceChildren(...buttons(status, canMove).map(([action, iconName, label, danger]) => iconButton(action, iconName, label, danger)));
    }
    for (const b of row.ops.children) setAttr(b, "aria-label", b.title + " " + name);
    setAttr(row.sel, "aria-label", "Select " + name);
  }

  return { make, update, buttons };
})();
