"use strict";

// The page: the secret first, then one page of one tab of downloads.
//
// Every second (and soon after a notification) one multicall fetches aria2.getGlobalStat for
// the counts and only the rows on screen: tellWaiting/tellStopped with an offset and at most
// PAGE_SIZE, whatever the length of the queue. A search, a status filter or a sort needs the
// whole tab once: it is read in batches of INDEX_BATCH with only the keys it needs, into an
// index of GIDs; refreshes then ask tellStatus for the page's GIDs only. The index is read
// again when the user changes the query, after the page itself adds or removes downloads, or
// when the counts or notifications say the tab changed (at most every INDEX_MIN_AGE_MS).
// Removing, with its Undo, and ticked rows are batch.js's.
(() => {
  const { $, setText, setAttr, toast } = Dom;
  const PAGE_SIZE = 50;
  const POLL_MS = 1000, HIDDEN_POLL_MS = 5000;
  const INDEX_BATCH = 1000, INDEX_MIN_AGE_MS = 10000;
  const ROW_KEYS = ["gid", "status", "totalLength", "completedLength", "downloadSpeed", "connections", "errorCode", "errorMessage", "files", "dir", "waitingReason", "daemon"];
  const TAB_LISTS = { all: ["active", "waiting", "stopped"], active: ["active"], waiting: ["waiting"], stopped: ["stopped"] };
  const TAB_STATUSES = {
    all: ["active", "waiting", "paused", "complete", "error", "removed"], active: ["active"],
    waiting: ["waiting", "paused"], stopped: ["complete", "error", "removed"],
  };
  const TOKEN_KEY = "haul.rpcSecret", DIR_KEY = "haul.lastDir", COMPACT_KEY = "haul.compactRows";

  function storageGet(k) { try { return localStorage.getItem(k); } catch (e) { return null; } }
  function storageSet(k, v) { try { if (v == null || v === "") localStorage.removeItem(k); else localStorage.setItem(k, v); } catch (e) { /* private mode */ } }

  const rpc = new Rpc();
  rpc.secret = storageGet(TOKEN_KEY);

  // "#token=SECRET" in the address: keep it in localStorage and take it out of the address bar.
  function takeTokenFromFragment() {
    const hash = location.hash.replace(/^#/, "");
    if (!hash) return false;
    const frag = new URLSearchParams(hash);
    if (!frag.has("token")) return false;
    rpc.secret = frag.get("token");
    storageSet(TOKEN_KEY, rpc.secret);
    frag.delete("token");
    const rest = frag.toString();
    try { history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : "")); } catch (e) { /* keep it */ }
    return true;
  }
  takeTokenFromFragment();

  const view = { tab: "all", page: 0, search: "", filter: "", sort: "queue", desc: false };
  let counts = null;        // { all, active, waiting, stopped } from the last aria2.getGlobalStat
  let index = null;         // { key, gids, size, builtAt } while a search, filter or sort is on
  let indexDirty = false;
  let building = null;      // the query key being indexed
  let auth = "probing";     // probing | needed | ok
  let authorizedOnce = false;
  let refreshing = false, again = false, timer = null, refreshes = 0;
  let lastTotal = 0, shownKey = "";
  const rows = new Map();   // gid -> row (Rows.make)


  const detail = createDetail({ rpc, act, move, refreshNow });
  const settings = createSettings({ rpc, refreshNow });
  const batch = createBatch({ rpc, rows, detail, statusOf, run, invalidateIndex, refreshNow });

  // ---------- connection and secret ----------

  function setConn(state, text, detailText) {
    $("conn").className = "conn " + state;
    setText($("connText"), text);
    $("offline").hidden = !detailText;
    if (detailText) setText($("offlineText"), detailText);
  }

  function setAuth(state, hint) {
    auth = state;
    document.body.dataset.auth = state;
    const ok = state === "ok";
    if (ok) authorizedOnce = true;
    // Nothing from the daemon shows until it has accepted the secret.
    const show = ok || (state === "probing" && authorizedOnce);
    $("app").hidden = !show;
    $("stats").hidden = !show;
    $("actions").hidden = !show;
    $("auth").hidden = state !== "needed";
    document.body.dataset.connected = ok && rpc.isOpen ? "true" : "false";
    if (ok) setConn("ok", "Live");
    else if (state === "needed") setConn("bad", "Secret needed");
    if (state === "needed") {
      setText($("authHint"), hint || (rpc.secret ? "The saved secret was not accepted — enter it again." : "Enter the secret it was started with."));
      if (document.activeElement !== $("authInput")) $("authInput").focus();
      clearTimeout(timer);
      detail.close();
    }
  }

  // A cheap call first: without the secret the daemon says "Unauthorized" (after a second, to
  // slow guessing), and then only the prompt shows.
  function probe(hint) {
    if (!authorizedOnce) setAuth("probing");
    rpc.call("aria2.getGlobalStat").then((stat) => {
      applyStat(stat);
      setAuth("ok");
      refreshNow();
    }, (e) => {
      if (Rpc.isUnauthorized(e)) setAuth("needed", hint);
      // Anything else is a lost connection: reconnecting probes again.
    });
  }

  rpc.on("open", () => {
    setConn("", authorizedOnce ? "Live" : "Connecting…");
    probe();
  });
  let countdown = null;
  rpc.on("close", (until) => {
    document.body.dataset.connected = "false";
    clearInterval(countdown);
    const tick = () => {
      const left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      setConn("bad", "Offline", left > 0 ? "Disconnected — retrying in " + left + "s" : "Disconnected — retrying…");
    };
    tick();
    countdown = setInterval(tick, 1000);
  });
  rpc.on("open", () => clearInterval(countdown));
  rpc.on("notification", (m) => {
    if (!/^aria2\.onDownload/.test(m.method)) return;
    indexDirty = true;
    refreshSoon();
  });

  $("authForm").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = $("authInput").value.trim();
    if (!v) return;
    rpc.secret = v;
    storageSet(TOKEN_KEY, v);
    $("authInput").value = "";
    setText($("authHint"), "Checking…");
    probe("That secret was not accepted — try again.");
  });
  $("retryNow").addEventListener("click", () => rpc.reconnectNow());
  window.addEventListener("hashchange", () => { if (takeTokenFromFragment() && rpc.isOpen) probe(); });

  // ---------- refreshing ----------

  function refreshNow() { clearTimeout(timer); timer = setTimeout(refresh, 0); }
  function refreshSoon() {
    if (refreshing) { again = true; return; }
    clearTimeout(timer);
    timer = setTimeout(refresh, 50);
  }

  async function refresh() {
    clearTimeout(timer);
    if (auth !== "ok" || !rpc.isOpen) return;
    if (refreshing) { again = true; return; }
    refreshing = true;
    again = false;
    try {
      const plan = planPage();
      const calls = [["aria2.getGlobalStat"], ...plan.calls, ["haul.tellMirrors"], ["haul.tellUploads"]];
      const detailGid = detail.gid;
      if (detailGid) calls.push(["aria2.tellStatus", detailGid]);
      const results = await rpc.multicall(calls);
      if (results[0].error) throw results[0].error;
      applyStat(results[0].value);
      renderMirrors(results[1 + plan.calls.length].value || []);
      renderUploads(results[2 + plan.calls.length].value || []);
      if (detailGid && detailGid === detail.gid && results[calls.length - 1].value) detail.update(results[calls.length - 1].value);
      if (plan.pending) showSearching();
      else render(plan.rows(results.slice(1, 1 + plan.calls.length)), plan.total());
      if (plan.stale && plan.stale()) again = true;
      refreshes++;
      document.body.dataset.refreshes = String(refreshes);
      maybeRebuildIndex();
    } catch (e) {
      if (Rpc.isUnauthorized(e)) setAuth("needed");
    } finally {
      refreshing = false;
      if (auth === "ok" && rpc.isOpen) timer = setTimeout(refresh, again ? 0 : document.hidden ? HIDDEN_POLL_MS : POLL_MS);
    }
  }
  document.addEventListener("visibilitychange", () => { if (!document.hidden) refreshSoon(); });

  function applyStat(stat) {
    const n = (k) => Fmt.num(stat[k]);
    counts = { active: n("numActive"), waiting: n("numWaiting"), stopped: n("numStopped") };
    counts.all = counts.active + counts.waiting + counts.stopped;
    setText($("countAll"), Fmt.count(counts.all));
    setText($("countActive"), Fmt.count(counts.active));
    setText($("countWaiting"), Fmt.count(counts.waiting));
    setText($("countStopped"), Fmt.count(counts.stopped));
    // aria2's global speed is a moving average that lingers after the last download stops.
    setText($("gSpeed"), Fmt.speed(counts.active ? stat.downloadSpeed : 0));
    $("pauseAll").disabled = !(counts.active || counts.waiting);
    $("resumeAll").disabled = !counts.waiting;
    $("purge").disabled = !counts.stopped;
  }

  // The daemon's mirrors (haul mirror --every), their files grouped: a line each.
  function renderMirrors(mirrors) {
    $("mirrors").hidden = mirrors.length === 0;
    const n = (o, k) => Fmt.num(o && o[k]);
    $("mirrorList").replaceChildren(...mirrors.map((m) => {
      const li = Dom.el("li", "mirror " + m.status);
      li.dataset.mirror = m.id;
      const what = Dom.el("div", "mirror-what");
      what.append(Dom.el("span", "mirror-url", m.url), Dom.el("span", "mirror-arrow", " → "), Dom.el("span", "mirror-dir", m.dir));
      let files;
      if (m.status === "active") {
        const all = n(m, "numActive") + n(m, "numWaiting") + n(m, "numComplete") + n(m, "numFailed");
        files = "Copying: " + Fmt.count(n(m, "numComplete")) + " of " + Fmt.count(all) + " files · " + Fmt.speed(m.downloadSpeed);
      } else if (m.last) {
        files = (m.last.interrupted === "true" ? "Stopped: " : "Last run: ") + Fmt.count(n(m.last, "new")) + " new, " +
          Fmt.count(n(m.last, "updated")) + " updated, " + Fmt.count(n(m.last, "unchanged")) + " unchanged, " +
          Fmt.count(n(m.last, "deleted")) + " deleted" + (n(m.last, "failed") ? ", " + Fmt.count(n(m.last, "failed")) + " failed" : "");
      } else {
        files = m.status === "waiting" ? "Not run yet" : "Last run failed";
      }
      if (m.nextRun) files += " · next run in " + Fmt.duration(Math.max(0, n(m, "nextRun") - Date.now() / 1000));
      const facts = Dom.el("div", "mirror-facts", files);
      const problem = m.problems && m.problems.length ? Dom.el("div", "mirror-problem", m.problems[0]) : null;
      const actions = Dom.el("div", "mirror-actions");
      actions.append(Dom.iconButton("runMirror", "retry", "Run this mirror now"), Dom.iconButton("removeMirror", "x", "Stop and forget this mirror (its files stay)", true));
      li.append(what, facts, ...(problem ? [problem] : []), actions);
      return li;
    }));
  }
  $("mirrorList").addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-action]");
    const item = event.target.closest("[data-mirror]");
    if (!button || !item) return;
    try {
      await rpc.call(button.dataset.action === "runMirror" ? "haul.runMirror" : "haul.removeMirror", item.dataset.mirror);
    } catch (e) {
      Dom.toast(e.message || String(e));
    }
    refreshNow();
  });

  // The daemon's uploads (haul put --daemon, haul.addUpload): a line each.
  const UPLOAD_LABEL = { active: "Sending", waiting: "Queued", paused: "Paused", complete: "Sent", error: "Error", removed: "Cancelled" };
  function renderUploads(uploads) {
    $("uploads").hidden = uploads.length === 0;
    const n = (o, k) => Fmt.num(o && o[k]);
    $("uploadList").replaceChildren(...uploads.map((u) => {
      const li = Dom.el("li", "mirror upload " + u.status);
      li.dataset.upload = u.gid;
      const what = Dom.el("div", "mirror-what");
      what.append(Dom.el("span", "mirror-dir", u.file), Dom.el("span", "mirror-arrow", " → "), Dom.el("span", "mirror-url", u.url));
      const total = n(u, "totalLength"), sent = n(u, "uploadLength");
      let facts = (UPLOAD_LABEL[u.status] || u.status) + (u.protocol ? " · " + u.protocol : "");
      if (u.totalLength !== undefined) facts += " · " + Fmt.bytes(sent) + " of " + Fmt.bytes(total);
      if (u.status === "active") facts += " · " + Fmt.speed(u.uploadSpeed);
      const problem = u.errorMessage || u.restartReason || u.note;
      const actions = Dom.el("div", "mirror-actions");
      if (u.status === "active" || u.status === "waiting") actions.append(Dom.iconButton("pause", "pause", "Pause"));
      if (u.status === "paused" || u.status === "error") actions.append(Dom.iconButton("resume", "play", "Resume"));
      const stopped = u.status === "complete" || u.status === "error" || u.status === "removed";
      actions.append(Dom.iconButton("remove", "x", stopped ? "Remove from list" : "Cancel upload", true));
      li.append(what, Dom.el("div", "mirror-facts", facts), ...(problem ? [Dom.el("div", "mirror-problem", problem)] : []), actions);
      return li;
    }));
  }
  $("uploadList").addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-action]");
    const item = event.target.closest("[data-upload]");
    if (!button || !item) return;
    const gid = item.dataset.upload, stopped = /\b(complete|error|removed)\b/.test(item.className);
    const method = button.dataset.action === "pause" ? "aria2.pause"
      : button.dataset.action === "resume" ? "aria2.unpause"
      : stopped ? "aria2.removeDownloadResult" : "aria2.remove";
    try {
      await rpc.call(method, gid);
    } catch (e) {
      if (Rpc.isUnauthorized(e)) setAuth("needed");
      else Dom.toast(e.message || String(e));
    }
    refreshNow();
  });

  function tabTotal() { return counts ? counts[view.tab] : 0; }
  function isQuery() { return view.search !== "" || view.filter !== "" || view.sort !== "queue" || view.desc; }
  function queryKey() { return JSON.stringify([view.tab, view.search.toLowerCase(), view.filter, view.sort, view.desc]); }

  // The calls that fetch the current page, and how to read their answers.
  function planPage() {
    const from = view.page * PAGE_SIZE;
    if (isQuery()) {
      if (!index || index.key !== queryKey()) {
        buildIndex();
        return { calls: [], pending: true };
      }
      const gids = index.gids.slice(from, from + PAGE_SIZE);
      const total = index.gids.length;
      return {
        calls: gids.map((gid) => ["aria2.tellStatus", gid, ROW_KEYS]),
        // A download removed since the index was read answers an error: it is left out.
        rows: (answers) => answers.filter((a) => a.value).map((a) => a.value),
        total: () => total,
      };
    }
    const calls = [], parts = [], planned = counts;
    let offset = from, want = PAGE_SIZE;
    for (const list of TAB_LISTS[view.tab]) {
      const n = counts[list];
      if (want <= 0) break;
      if (offset >= n) { offset -= n; continue; }
      const take = Math.min(want, n - offset);
      // tellActive has no window; it lists at most max-concurrent-downloads.
      if (list === "active") { calls.push(["aria2.tellActive", ROW_KEYS]); parts.push([offset, take]); }
      else if (list === "waiting") { calls.push(["aria2.tellWaiting", offset, take, ROW_KEYS]); parts.push([0, take]); }
      // Newest first: aria2 counts a negative offset from the end, backwards.
      else { calls.push(["aria2.tellStopped", -1 - offset, take, ROW_KEYS]); parts.push([0, take]); }
      want -= take;
      offset = 0;
    }
    return {
      calls,
      rows: (answers) => answers.flatMap((a, i) => (Array.isArray(a.value) ? a.value.slice(parts[i][0], parts[i][0] + parts[i][1]) : [])),
      total: tabTotal,
      // Planned with the last counts: if the lists changed since, this page may be off by a few.
      stale: () => ["active", "waiting", "stopped"].some((list) => planned[list] !== counts[list]),
    };
  }

  // ---------- search, filter and sort over the whole tab ----------

  function neededKeys() {
    const keys = ["gid", "status"];
    if (view.search || view.sort === "name") keys.push("files");
    if (view.sort === "size" || view.sort === "progress") keys.push("totalLength");
    if (view.sort === "progress") keys.push("completedLength");
    return keys;
  }

  async function fetchAll(list, keys) {
    if (list === "active") return rpc.call("aria2.tellActive", keys);
    const method = list === "waiting" ? "aria2.tellWaiting" : "aria2.tellStopped";
    const all = [];
    for (let offset = 0; ; offset += INDEX_BATCH) {
      const part = await rpc.call(method, offset, INDEX_BATCH, keys);
      all.push(...part);
      if (part.length < INDEX_BATCH) break;
    }
    return list === "stopped" ? all.reverse() : all;
  }

  const COMPARE = {
    name: (a, b) => Fmt.nameOf(a).localeCompare(Fmt.nameOf(b), undefined, { numeric: true, sensitivity: "base" }),
    size: (a, b) => Fmt.num(a.totalLength) - Fmt.num(b.totalLength),
    progress: (a, b) => Fmt.percentOf(a) - Fmt.percentOf(b),
    status: (a, b) => (Fmt.STATUS_RANK[a.status] ?? 9) - (Fmt.STATUS_RANK[b.status] ?? 9),
  };

  function select(all, query) {
    let list = all;
    if (query.filter) list = list.filter((d) => d.status === query.filter);
    if (query.search) {
      const needle = query.search.toLowerCase();
      list = list.filter((d) => [Fmt.nameOf(d), Fmt.path(d), ...Fmt.uris(d)].join("\n").toLowerCase().includes(needle));
    }
    const sign = query.desc ? -1 : 1;
    const compare = COMPARE[query.sort];
    if (compare) {
      // Ties keep the queue order.
      list = list.map((d, i) => [d, i]).sort((x, y) => sign * compare(x[0], y[0]) || x[1] - y[1]).map((x) => x[0]);
    } else if (query.desc) {
      list = list.slice().reverse();
    }
    return list;
  }

  async function buildIndex() {
    const key = queryKey();
    if (building === key) return;
    building = key;
    const query = { ...view }, keys = neededKeys();
    if (!index || index.key !== key) showSearching();
    try {
      const all = [], seen = new Set();
      for (const list of TAB_LISTS[query.tab]) {
        for (const d of await fetchAll(list, keys)) {
          if (!seen.has(d.gid)) { seen.add(d.gid); all.push(d); }
        }
      }
      if (building !== key) return;
      index = { key, gids: select(all, query).map((d) => d.gid), size: all.length, builtAt: Date.now() };
      indexDirty = false;
    } catch (e) {
      if (Rpc.isUnauthorized(e)) setAuth("needed");
      else if (building === key) toast("Could not search: " + e.message);
    } finally {
      if (building === key) {
        building = null;
        refreshNow();
      }
    }
  }

  function maybeRebuildIndex() {
    if (!isQuery() || !index || index.key !== queryKey() || building) return;
    if ((indexDirty || index.size !== tabTotal()) && Date.now() - index.builtAt >= INDEX_MIN_AGE_MS) buildIndex();
  }

  // The page itself added or removed downloads: read the index again on the next refresh.
  function invalidateIndex() {
    indexDirty = true;
    if (index) index.builtAt = 0;
  }

  // ---------- rendering ----------

  function showSearching() {
    setText($("range"), "Searching " + Fmt.count(tabTotal()) + " downloads…");
    setText($("indexNote"), "");
  }

  function render(list, total) {
    const pages = Math.max(1, Math.ceil(total / PAGE_SIZE));
    if (view.page >= pages) {
      view.page = pages - 1;
      again = true;
    }
    const key = queryKey() + "/" + view.page;
    const animate = key === shownKey;
    shownKey = key;
    const canMove = !isQuery();
    const ul = $("list"), seen = new Set();
    let cursor = ul.firstElementChild;
    list.forEach((d) => {
      const gid = String(d.gid);
      if (seen.has(gid) || batch.isBeingRemoved(gid)) return;
      seen.add(gid);
      let row = rows.get(gid);
      if (!row) { row = Rows.make(gid, animate); rows.set(gid, row); }
      Rows.update(row, d, canMove);
      if (row.el === cursor) cursor = cursor.nextElementSibling;
      else ul.insertBefore(row.el, cursor);
    });
    rows.forEach((row, gid) => { if (!seen.has(gid)) { row.el.remove(); rows.delete(gid); } });
    batch.rowsChanged();

    lastTotal = total;
    const first = view.page * PAGE_SIZE;
    setText($("range"), total ? Fmt.count(first + 1) + "–" + Fmt.count(first + seen.size) + " of " + Fmt.count(total) : "");
    setText($("indexNote"), isQuery() && index ? (view.search || view.filter ? "matching, of " + Fmt.count(index.size) + " in this tab" : "") : "");
    document.querySelectorAll(".pager").forEach((pager) => {
      pager.hidden = pages <= 1;
      setText(pager.querySelector(".page-text"), "Page " + Fmt.count(view.page + 1) + " of " + Fmt.count(pages));
      const input = pager.querySelector(".page-input");
      setAttr(input, "max", pages);
      if (document.activeElement !== input) input.value = "";
      pager.querySelectorAll("button").forEach((b) => {
        const back = b.dataset.page === "first" || b.dataset.page === "prev";
        b.disabled = back ? view.page === 0 : view.page >= pages - 1;
      });
    });

    $("empty").hidden = seen.size > 0;
    if (!seen.size) {
      const nothingAtAll = counts && counts.all === 0;
      setText($("emptyTitle"), nothingAtAll ? "No downloads yet — paste a URL above" : isQuery() ? "Nothing matches" : "Nothing here");
      setText($("emptyText"), nothingAtAll ? "Downloads resume where they left off if the connection drops."
        : isQuery() ? "Change the search or the filter, or look in another tab." : "Downloads in other tabs are not shown here.");
    }
  }

  // ---------- actions ----------

  function run(button, work, failText) {
    if (button) button.disabled = true;
    return Promise.resolve(work).catch((e) => {
      if (Rpc.isUnauthorized(e)) setAuth("needed");
      else toast(failText + ": " + e.message);
    }).then(() => {
      if (button) button.disabled = false;
      refreshNow();
    });
  }

  function statusOf(gid) {
    const row = rows.get(gid);
    if (row && row.data) return row.data.status;
    return detail.gid === gid ? detail.status : "";
  }

  function act(action, gid, button) {
    switch (action) {
      case "pause": return run(button, rpc.call("aria2.pause", gid), "Could not pause");
      case "resume": return run(button, rpc.call("aria2.unpause", gid), "Could not resume");
      case "retry": return run(button, retry(gid), "Could not retry");
      case "up": case "down": return move(gid, action, button);
      case "details": {
        const row = rows.get(gid);
        return detail.open(gid, row && row.data);
      }
      case "remove": return batch.remove([gid]);
    }
  }

  // ---------- compact rows ----------

  function setCompact(on) {
    document.body.classList.toggle("compact", on);
    $("compact").setAttribute("aria-pressed", String(on));
    storageSet(COMPACT_KEY, on ? "1" : "");
  }
  setCompact(storageGet(COMPACT_KEY) === "1");
  $("compact").addEventListener("click", () => setCompact(!document.body.classList.contains("compact")));

  function move(gid, how, button) {
    const [offset, origin] = { top: [0, "POS_SET"], up: [-1, "POS_CUR"], down: [1, "POS_CUR"], bottom: [0, "POS_END"] }[how];
    return run(button, rpc.call("aria2.changePosition", gid, offset, origin), "Could not move it");
  }

  // As AriaNg does: the failed download's options and URL, its result removed, the URL added
  // again with those options. If the add fails the URL goes back into the add box.
  async function retry(gid) {
    const [status, options] = await rpc.multicall([["aria2.tellStatus", gid, ["gid", "status", "files"]], ["aria2.getOption", gid]]);
    if (status.error) throw status.error;
    if (options.error) throw options.error;
    const url = Fmt.firstUri(status.value);
    if (!url) throw new Error("it has no URL to try again");
    await rpc.call("aria2.removeDownloadResult", gid);
    invalidateIndex();
    try {
      return await rpc.call("aria2.addUri", [url], options.value || {});
    } catch (e) {
      urls.value = (urls.value.trim() ? urls.value.trim() + "\n" : "") + url;
      autosize();
      throw new Error(e.message + " (its URL is back in the box above)");
    }
  }

  $("list").addEventListener("click", (ev) => {
    const li = ev.target.closest("[data-gid]");
    if (!li) return;
    const b = ev.target.closest("button[data-action]");
    if (b) act(b.dataset.action, li.dataset.gid, b);
    else if (ev.target.closest(".name")) act("details", li.dataset.gid);
  });

  $("pauseAll").addEventListener("click", (ev) => run(ev.currentTarget, rpc.call("aria2.pauseAll"), "Could not pause all"));
  $("resumeAll").addEventListener("click", (ev) => run(ev.currentTarget, rpc.call("aria2.unpauseAll"), "Could not resume all"));
  $("purge").addEventListener("click", (ev) => run(ev.currentTarget, rpc.call("aria2.purgeDownloadResult").then(invalidateIndex), "Could not clear finished downloads"));
  $("openSettings").addEventListener("click", () => settings.open());

  // ---------- tabs, search, filter, sort, pages ----------

  function changeView(change) {
    Object.assign(view, change);
    batch.clearSelection();
    if (!("page" in change)) view.page = 0;
    refreshNow();
  }

  $("tabs").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-tab]");
    if (!b || b.dataset.tab === view.tab) return;
    $("tabs").querySelectorAll("button[data-tab]").forEach((t) => setAttr(t, "aria-selected", t === b));
    const allowed = TAB_STATUSES[b.dataset.tab];
    const filter = $("filter");
    for (const option of filter.options) option.hidden = option.value !== "" && !allowed.includes(option.value);
    if (filter.value && !allowed.includes(filter.value)) filter.value = "";
    changeView({ tab: b.dataset.tab, filter: filter.value });
  });

  let searchTimer = null;
  $("search").addEventListener("input", (ev) => {
    clearTimeout(searchTimer);
    const value = ev.currentTarget.value.trim();
    searchTimer = setTimeout(() => { if (value !== view.search) changeView({ search: value }); }, 250);
  });
  $("filter").addEventListener("change", (ev) => changeView({ filter: ev.currentTarget.value }));
  $("sort").addEventListener("change", (ev) => changeView({ sort: ev.currentTarget.value }));
  $("order").addEventListener("click", (ev) => {
    const desc = !view.desc;
    ev.currentTarget.setAttribute("aria-pressed", String(desc));
    setText(ev.currentTarget, desc ? "↓" : "↑");
    changeView({ desc });
  });
  document.querySelectorAll(".pager").forEach((pager) => {
    const last = () => Math.max(0, Math.ceil(lastTotal / PAGE_SIZE) - 1);
    pager.addEventListener("click", (ev) => {
      const b = ev.target.closest("button[data-page]");
      if (!b) return;
      const page = { first: 0, prev: view.page - 1, next: view.page + 1, last: last() }[b.dataset.page];
      changeView({ page: Math.max(0, Math.min(last(), page)) });
    });
    pager.querySelector("form.jump").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const input = pager.querySelector(".page-input");
      const page = Math.round(Number(input.value));
      if (!isFinite(page) || page < 1) return;
      input.blur();
      changeView({ page: Math.min(last(), page - 1) });
    });
  });

  // ---------- adding ----------

  const urls = $("urls"), dirInput = $("dir"), addMsg = $("addMsg");
  dirInput.value = storageGet(DIR_KEY) || "";
  function autosize() {
    urls.style.height = "auto";
    urls.style.height = Math.min(200, Math.max(44, urls.scrollHeight + 2)) + "px";
  }
  function say(text, isErr) {
    addMsg.hidden = !text;
    addMsg.className = "add-msg" + (isErr ? " err" : "");
    addMsg.textContent = text || "";
  }
  urls.addEventListener("input", autosize);
  urls.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.metaKey || ev.ctrlKey)) { ev.preventDefault(); $("addForm").requestSubmit(); }
  });
  $("addForm").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const list = urls.value.split(/\r?\n/).map((s) => s.trim()).filter(Boolean);
    if (!list.length) { say("Paste at least one URL.", true); urls.focus(); return; }
    const dir = dirInput.value.trim();
    storageSet(DIR_KEY, dir);
    const options = {};
    if (dir) options.dir = dir;
    if ($("addPaused").checked) options.pause = "true";
    const btn = $("addBtn");
    btn.disabled = true;
    say("");
    Promise.all(list.map((u) => rpc.call("aria2.addUri", [u], options).then(() => null, (error) => ({ url: u, error }))))
      .then((results) => {
        const failed = results.filter(Boolean);
        if (failed.some((f) => Rpc.isUnauthorized(f.error))) setAuth("needed");
        if (!failed.length) {
          // A fresh form for the next add; the folder is remembered on purpose.
          urls.value = "";
          $("addPaused").checked = false;
        } else {
          urls.value = failed.map((f) => f.url).join("\n");
          const first = failed[0].error;
          say(failed.length === list.length
            ? "Could not add: " + first.message
            : "Added " + (list.length - failed.length) + " of " + list.length + ". The rest failed: " + first.message, true);
        }
        autosize();
        invalidateIndex();
      })
      .then(() => { btn.disabled = false; refreshNow(); });
  });

  rpc.connect();
})();
