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

  // A size or rate as the daemon takes it back: aria2's K, M and G are binary (614400 → 600K).
  function sizeInput(s) {
    const n = Math.round(num(s));
    if (!n) return "0";
    for (const [unit, size] of [["G", 1 << 30], ["M", 1 << 20], ["K", 1 << 10]]) {
      if (n % size === 0) return n / size + unit;
    }
    return String(n);
  }

  // "600K" → 614400 (what the daemon will store), or NaN when it is not a size.
  function parseSize(text) {
    const m = /^\s*(\d+(?:\.\d+)?)\s*([KMG]?)i?B?\s*$/i.exec(String(text));
    if (!m) return NaN;
    return Math.round(Number(m[1]) * ({ "": 1, K: 1 << 10, M: 1 << 20, G: 1 << 30 }[m[2].toUpperCase()]));
  }

  // aria2's option names as the page labels them, and how their values read.
  const OPTIONS = {
    "dir": ["Folder", "text"], "out": ["File name", "text"],
    "max-concurrent-downloads": ["Downloads at once", "count"],
    "max-overall-download-limit": ["Speed limit for all downloads", "rate"],
    "max-download-limit": ["Speed limit", "rate"],
    "split": ["Connections per download", "count"],
    "max-connection-per-server": ["Connections per server", "count"],
    "min-split-size": ["Smallest part split off", "size"],
    "max-tries": ["Tries", "tries"], "retry-wait": ["Wait between tries", "seconds"],
    "checksum": ["Checksum", "text"], "header": ["Extra headers", "text"],
    "allow-overwrite": ["Replace a different file there", "bool"],
    "all-proxy": ["Proxy", "text"], "http-proxy": ["Proxy for http://", "text"], "https-proxy": ["Proxy for https://", "text"],
    "no-proxy": ["Without proxy", "text"], "all-proxy-user": ["Proxy user", "text"], "all-proxy-passwd": ["Proxy password", "text"],
    "ca-certificate": ["Extra CA certificates", "text"], "check-certificate": ["Check certificates", "bool"],
    "certificate": ["Client certificate", "text"], "private-key": ["Client key", "text"],
    "http-user": ["User", "text"], "http-passwd": ["Password", "text"],
    "netrc-path": [".netrc file", "text"], "no-netrc": ["Ignore .netrc", "bool"], "load-cookies": ["Cookies from", "text"],
    "user-agent": ["User agent", "text"], "referer": ["Referer", "text"],
    "connect-timeout": ["Connect timeout", "seconds"], "max-redirect": ["Redirects followed", "count"], "http2": ["HTTP/2", "bool"],
  };

  function optionLabel(key) { return OPTIONS[key] ? OPTIONS[key][0] : key; }

  function optionValue(key, value) {
    const text = Array.isArray(value) ? value.join("\n") : String(value == null ? "" : value);
    switch (OPTIONS[key] && OPTIONS[key][1]) {
      case "rate": return num(text) ? speed(text) : "no limit";
      case "size": return bytes(text);
      case "seconds": return text + " s";
      case "tries": return text === "0" ? "no end" : text;
      case "bool": return text === "true" ? "yes" : text === "false" ? "no" : text;
      default: return text;
    }
  }

  // Why a waiting download waits (the daemon's waitingReason), in words.
  function waitText(d) {
    if (d.status === "paused") return "Paused: it waits until you resume it";
    if (d.status !== "waiting") return "";
    const r = d.waitingReason || {};
    switch (r.kind) {
      case "slot": return "Waiting for a free slot (" + r.running + " of " + r.limit + " running)";
      case "writing": return "Waiting: " + r.pending + " finished downloads are still being written to disk";
      case "host": return "Waiting: host " + r.host + " has its " + r.limit + " connections (--max-connections-per-host)";
      case "dependency": return "Waiting for download " + (r.name || r.gid);
      case "starting": return "Starting";
      default: return "Waiting";
    }
  }

  // aria2's URI status ("used" / "waiting") as it reads.
  function uriStatus(u, d) {
    // Haul's keys beyond aria2's: a dropped source says why, a used one its own speed.
    if (u.dropped) return "Dropped: " + u.dropped;
    if (u.status === "used") return u.downloadSpeed !== undefined ? "In use · " + speed(u.downloadSpeed) : "In use";
    return { complete: "Was used", error: "Was tried", removed: "Was used" }[d.status] || "Not in use yet";
  }

  return { STATUS_LABEL, STATUS_RANK, num, bytes, speed, count, duration, percentOf, uris, firstUri, path, nameOf, isStopped, errorText,
    sizeInput, parseSize, optionLabel, optionValue, waitText, uriStatus };
})();
