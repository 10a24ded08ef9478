"use strict";

// Removing with Undo, and ticked rows acted on together.
//
// A removal waits UNDO_MS before it reaches the daemon, and Undo cancels it. Re-adding the
// download afterwards (as Retry does) would lose what it had: the daemon deletes an unfinished
// download's partial file on remove, and a new GID takes a new place in the queue. Meanwhile
// its row is hidden; a page closed within those seconds removes nothing.
//
// Ticked rows are paused, resumed or removed in one system.multicall.
//
// app: { rpc, rows (gid -> row), detail, statusOf(gid), run(button, work, failText),
//        invalidateIndex(), refreshNow() }
function createBatch(app) {
  const { $, setText, toast } = Dom;
  const UNDO_MS = 8000;
  let removal = null;         // { gids, statuses, timer } while the Undo bar shows
  // gid -> its last status, ticked on this page. Kept through a refresh that misses the row
  // (one planned with counts that changed meanwhile); cleared when the view changes.
  const selected = new Map();

  // ---------- removing, with Undo ----------

  function remove(gids) {
    commit();
    const names = gids.map((gid) => { const row = app.rows.get(gid); return row && row.data ? Fmt.nameOf(row.data) : "download " + gid; });
    removal = { gids, statuses: gids.map((gid) => app.statusOf(gid) || selected.get(gid) || ""), timer: setTimeout(commit, UNDO_MS) };
    if (gids.includes(app.detail.gid)) app.detail.close();
    gids.forEach((gid) => {
      selected.delete(gid);
      const row = app.rows.get(gid);
      if (row) { row.el.remove(); app.rows.delete(gid); }
    });
    setText($("undoText"), "Removed " + (gids.length === 1 ? names[0] : Fmt.count(gids.length) + " downloads"));
    $("undo").hidden = false;
    $("undoBtn").focus({ preventScroll: true });
    showSelection();
    app.refreshNow();
  }

  function undo() {
    if (!removal) return;
    clearTimeout(removal.timer);
    removal = null;
    $("undo").hidden = true;
    app.refreshNow();
  }

  // Stopped downloads leave the list (removeDownloadResult), the others are cancelled
  // (remove); one that stopped or started again meanwhile gets the other method.
  function commit() {
    if (!removal) return;
    const { gids, statuses, timer } = removal;
    clearTimeout(timer);
    removal = null;
    $("undo").hidden = true;
    const method = (stopped) => (stopped ? "aria2.removeDownloadResult" : "aria2.remove");
    const work = app.rpc.multicall(gids.map((gid, i) => [method(Fmt.isStopped(statuses[i])), gid])).then((first) => {
      const again = gids.map((gid, i) => [gid, i]).filter(([, i]) => first[i].error);
      if (!again.length) return;
      return app.rpc.multicall(again.map(([gid, i]) => [method(!Fmt.isStopped(statuses[i])), gid])).then((second) => {
        const failed = second.filter((r) => r.error);
        if (failed.length) throw new Error(failed[0].error.message + (failed.length > 1 ? " (and " + (failed.length - 1) + " more)" : ""));
      });
    }).finally(app.invalidateIndex);
    return app.run(null, work, "Could not remove");
  }

  function isBeingRemoved(gid) { return !!removal && removal.gids.includes(gid); }

  $("undoBtn").addEventListener("click", undo);

  // ---------- selecting several ----------

  function showSelection() {
    const onScreen = [...app.rows.keys()];
    const ticked = onScreen.filter((gid) => selected.has(gid)).length;
    app.rows.forEach((row, gid) => { if (row.sel.checked !== selected.has(gid)) row.sel.checked = selected.has(gid); });
    const all = $("selectAll");
    all.checked = onScreen.length > 0 && ticked === onScreen.length;
    all.indeterminate = ticked > 0 && ticked < onScreen.length;
    all.disabled = !onScreen.length;
    $("batch").hidden = !selected.size;
    setText($("batchCount"), Fmt.count(selected.size) + " selected");
  }

  // After a render: the ticked rows' statuses as they are now.
  function rowsChanged() {
    app.rows.forEach((row, gid) => { if (selected.has(gid) && row.data) selected.set(gid, String(row.data.status)); });
    showSelection();
  }

  function clearSelection() {
    selected.clear();
    showSelection();
  }

  $("list").addEventListener("change", (ev) => {
    const box = ev.target.closest("input.sel");
    const li = box && box.closest("[data-gid]");
    if (!li) return;
    if (box.checked) selected.set(li.dataset.gid, app.statusOf(li.dataset.gid)); else selected.delete(li.dataset.gid);
    showSelection();
  });
  $("selectAll").addEventListener("change", (ev) => {
    if (ev.currentTarget.checked) app.rows.forEach((row, gid) => selected.set(gid, app.statusOf(gid)));
    else selected.clear();
    showSelection();
  });

  // Those that cannot (a finished one asked to pause) are left as they are, and the failures
  // are said in one line.
  function each(button, method, can, verb) {
    const gids = [...selected].filter(([, status]) => can(status)).map(([gid]) => gid);
    if (!gids.length) { toast("None of the selected downloads can be " + verb + "."); return; }
    const work = app.rpc.multicall(gids.map((gid) => [method, gid])).then((results) => {
      const failed = results.filter((r) => r.error);
      if (failed.length) throw new Error(failed.length + " of " + gids.length + " not " + verb + ": " + failed[0].error.message);
    });
    return app.run(button, work, "Could not do it");
  }

  $("batchPause").addEventListener("click", (ev) => each(ev.currentTarget, "aria2.pause", (s) => s === "active" || s === "waiting", "paused"));
  $("batchResume").addEventListener("click", (ev) => each(ev.currentTarget, "aria2.unpause", (s) => s === "paused", "resumed"));
  $("batchRemove").addEventListener("click", () => { if (selected.size) remove([...selected.keys()]); });
  $("batchClear").addEventListener("click", clearSelection);

  return { remove, isBeingRemoved, rowsChanged, clearSelection };
}
