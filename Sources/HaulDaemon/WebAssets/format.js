"use strict";

// How aria2's status objects (every number a decimal string) read to a person.
const Fmt = (() => {
  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  const STATUS_LABEL = { active: "Downloading", waiting: "Queued", paused: "Paused", complete: "Complete", error: "Error", removed: "Removed" };
  const STATUS_RANK = { active: 0, waiting: 1, paused: 2, error: 3, removed: 4, complete: 5 };

  function num(s) { const n = Number(s); return isFinite(n) && n > 0 ? n : 0; }

  function bytes(n) {
    n = num(n);
    if (n < 1024) return Math.round(n) + " B";
    let i = 0;
    while (n >= 1024 && i < UNITS.length - 1) { n /= 1024; i++; }
    return (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2)) + " " + UNITS[i];
  }

  function speed(n) { return bytes(n) + "/s"; }

  function count(n) { return num(n).toLocaleString("en-US"); }

  function duration(s) {
    s = Math.max(0, Math.round(s));
    if (s < 60) return s + "s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + "m " + (s % 60) + "s";
    const h = Math.floor(m / 60);
    if (h < 48) return h + "h " + (m % 60) + "m";
    return Math.floor(h / 24) + "d " + (h % 24) + "h";
  }

  function percentOf(d) {
    if (d.status === "complete") return 100;
    const total = num(d.totalLength), done = num(d.completedLength);
    if (!total) return 0;
    return Math.max(0, Math.min(100, Math.floor(done * 100 / total)));
  }

  function lastSegment(uri) {
    try {
      const u = new URL(uri);
      const parts = u.pathname.split("/").filter(Boolean);
      let seg = parts.length ? parts[parts.length - 1] : u.host;
      try { seg = decodeURIComponent(seg); } catch (e) { /* keep it encoded */ }
      return seg || uri;
    } catch (e) {
      const p = String(uri).split("?")[0].split("#")[0].split("/").filter(Boolean);
      return p.length ? p[p.length - 1] : String(uri);
    }
  }

  function uris(d) {
    const f = d.files && d.files[0];
    return f && Array.isArray(f.uris) ? f.uris.map((u) => String(u.uri || "")).filter(Boolean) : [];
  }

  function firstUri(d) { return uris(d)[0] || ""; }

  function path(d) {
    const f = d.files && d.files[0];
    return f && f.path ? String(f.path) : "";
  }

  function nameOf(d) {
    const p = path(d).split(/[\\/]/).filter(Boolean);
    if (p.length) return p[p.length - 1];
    if (d.bittorrent && d.bittorrent.info && d.bittorrent.info.name) return d.bittorrent.info.name;
    const u = firstUri(d);
    return u ? lastSegment(u) : "Download " + d.gid;
  }

  function isStopped(status) { return status === "complete" || status === "error" || status === "removed"; }

  function errorText(d) {
    return d.errorMessage || (d.errorCode && d.errorCode !== "0" ? "Error code " + d.errorCode : "Download failed");
  }

  return { STATUS_LABEL, STATUS_RANK, num, bytes, speed, count, duration, percentOf, uris, firstUri, path, nameOf, isStopped, errorText };
})();
