"use strict";

// The detail view of one download: what tellStatus says (refreshed with the list while it is
// open), its URIs, pieces, queue position, options (aria2.getOption) and its speed limit
// (aria2.changeOption max-download-limit).
//
// app: { rpc, act(action, gid, button), move(gid, how, button), refreshNow() }
function createDetail(app) {
  const { $, el, setText, setAttr, textButton, facts } = Dom;
  const dialog = $("detail");
  let gid = null, status = "", actionsFor = "";

  function open(g, d) {
    gid = g;
    status = "";
    actionsFor = "";
    $("detailOptions").replaceChildren();
    options = {};
    $("limitInput").value = "";
    say("");
    if (d) update(d);
    else setText($("detailName"), "Download " + g);
    if (!dialog.open) dialog.showModal();
    loadOptions();
    app.refreshNow();
  }

  function close() { if (dialog.open) dialog.close(); }

  function update(d) {
    if (!gid || d.gid !== gid) return;
    status = String(d.status || "");
    const name = Fmt.nameOf(d), p = Fmt.percentOf(d);
    const total = Fmt.num(d.totalLength), done = Fmt.num(d.completedLength);
    setAttr(dialog, "data-status", status);
    setAttr(dialog, "data-for", gid);
    setText($("detailName"), name);
    setText($("detailBadge"), Fmt.STATUS_LABEL[status] || status);
    const w = p + "%";
    if ($("detailFill").style.width !== w) $("detailFill").style.width = w;
    facts($("detailFacts"), [
      ["GID", [gid, "mono"]],
      // A download that failed before the server named the file has no file: its error says why.
      ["File", Fmt.path(d) ? [Fmt.path(d), "mono"] : status === "error" ? ["none: " + Fmt.errorText(d), "bad"] : "not known until the server answers"],
      ["Folder", [d.dir || "", "mono"]],
      ["Size", total ? Fmt.bytes(total) + " (" + Fmt.count(total) + " bytes)" : "unknown"],
      ["Downloaded", Fmt.bytes(done) + " · " + p + "%"],
      ["Waiting", Fmt.waitText(d)],
      ["Speed", status === "active" ? Fmt.speed(d.downloadSpeed) : ""],
      ["Connections", status === "active" ? String(Fmt.num(d.connections)) : ""],
      // In a fleet (daemons sharing one queue), the daemon that holds it.
      ["Daemon", d.daemon ? [d.daemon, "mono"] : ""],
      ["Error", status === "error" ? [Fmt.errorText(d) + (d.errorCode ? " (code " + d.errorCode + ")" : ""), "bad"] : ""],
    ]);
    drawPieces(d);
    const uris = d.files && d.files[0] && Array.isArray(d.files[0].uris) ? d.files[0].uris : [];
    $("detailUris").replaceChildren(...uris.map((u) => {
      const li = el("li");
      li.append(el("span", "uri-status", Fmt.uriStatus(u, d)), el("span", "uri", u.uri || ""));
      return li;
    }));
    $("detailQueue").hidden = !(status === "waiting" || status === "paused");
    $("detailLimit").hidden = Fmt.isStopped(status);
    if (actionsFor !== status) {
      actionsFor = status;
      $("detailActions").replaceChildren(...Rows.buttons(status, false)
        .filter(([action]) => action !== "details")
        .map(([action, icon, label, danger]) => textButton(action, icon, label, danger ? "danger" : "")));
    }
  }

  // The daemon's bitfield (hex, one bit a piece, the first piece in the highest bit), from
  // the ranges it has on disk; without one (the length is not known yet, or an older daemon)
  // the bar shows how much, not which pieces.
  function drawPieces(d) {
    const canvas = $("detailPieces");
    const n = Math.max(1, Fmt.num(d.numPieces)), pieceLength = Fmt.num(d.pieceLength);
    const total = Fmt.num(d.totalLength), done = Fmt.num(d.completedLength);
    const ratio = window.devicePixelRatio || 1;
    const width = Math.max(1, Math.round((canvas.clientWidth || 600) * ratio)), height = Math.round(18 * ratio);
    if (canvas.width !== width) canvas.width = width;
    if (canvas.height !== height) canvas.height = height;
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, width, height);
    ctx.fillStyle = getComputedStyle(canvas).color;
    const each = pieceLength ? " of " + Fmt.bytes(pieceLength) + " each" : "";
    if (typeof d.bitfield === "string" && d.bitfield) {
      let have = 0;
      for (let i = 0; i < n; i++) {
        const nibble = parseInt(d.bitfield[i >> 2] || "0", 16);
        if (!(nibble & (8 >> (i & 3)))) continue;
        have++;
        const x0 = Math.floor(i * width / n), x1 = Math.floor((i + 1) * width / n);
        ctx.fillRect(x0, 0, Math.max(1, x1 - x0), height);
      }
      setText($("detailPiecesText"), Fmt.count(have) + " of " + Fmt.count(n) + " pieces" + each);
    } else if (!total) {
      setText($("detailPiecesText"), "Not known until the server says how big the file is.");
    } else {
      const fraction = d.status === "complete" ? 1 : Math.min(1, done / total);
      ctx.fillRect(0, 0, Math.round(width * fraction), height);
      const piecesDone = d.status === "complete" ? n : pieceLength ? Math.floor(done / pieceLength) : 0;
      setText($("detailPiecesText"), Fmt.count(piecesDone) + " of " + Fmt.count(n) + " pieces" + each + ", counted from the bytes done");
    }
  }

  // The options under the page's own labels with values in units; the raw toggle shows
  // aria2's keys and values as getOption sends them.
  let options = {};
  function showOptions() {
    const raw = $("detailRaw").getAttribute("aria-pressed") === "true";
    const keys = Object.keys(options);
    const rows = keys.map((k) => raw
      ? [k, [Array.isArray(options[k]) ? options[k].join("\n") : String(options[k]), "mono"]]
      : [Fmt.optionLabel(k), Fmt.optionValue(k, options[k])]);
    rows.sort((a, b) => a[0].localeCompare(b[0]));
    facts($("detailOptions"), rows);
  }

  $("detailRaw").addEventListener("click", (ev) => {
    const raw = ev.currentTarget.getAttribute("aria-pressed") !== "true";
    ev.currentTarget.setAttribute("aria-pressed", String(raw));
    showOptions();
  });

  function loadOptions() {
    const asked = gid;
    app.rpc.call("aria2.getOption", asked).then((answer) => {
      if (asked !== gid) return;
      options = answer || {};
      showOptions();
      const input = $("limitInput");
      if (document.activeElement !== input) input.value = Fmt.sizeInput(options["max-download-limit"]);
      dialog.dataset.limit = options["max-download-limit"] || "0";
    }, (e) => { if (asked === gid) Dom.toast("Could not read the options: " + e.message); });
  }

  function say(text, kind) {
    const msg = $("limitMsg");
    msg.className = "hint" + (kind ? " " + kind : "");
    setText(msg, text || "");
  }

  $("limitForm").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const value = $("limitInput").value.trim() || "0";
    const asked = gid, button = $("limitSave");
    button.disabled = true;
    app.rpc.call("aria2.changeOption", asked, { "max-download-limit": value }).then(() => {
      if (asked !== gid) return;
      say(Fmt.num(Fmt.parseSize(value)) ? "Limited to " + Fmt.speed(Fmt.parseSize(value)) + "." : "No speed limit.", "ok");
      $("limitInput").blur();
      loadOptions();
    }, (e) => { if (asked === gid) say("Not changed: " + e.message, "err"); })
      .then(() => { button.disabled = false; });
  });

  $("detailQueue").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-move]");
    if (b && gid) app.move(gid, b.dataset.move, b);
  });

  $("detailActions").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-action]");
    if (!b || !gid) return;
    const action = b.dataset.action, target = gid;
    if (action === "remove" || action === "retry") close();
    app.act(action, target, b);
  });

  dialog.addEventListener("click", (ev) => {
    // A click on the backdrop lands on the dialog itself.
    if (ev.target === dialog || ev.target.closest("[data-close]")) close();
  });
  dialog.addEventListener("close", () => { gid = null; delete dialog.dataset.for; });

  return { open, close, update, get gid() { return gid; }, get status() { return status; } };
}
