/// The page the daemon serves at `/`: a self-contained web UI that drives the daemon through aria2 JSON-RPC over the `/jsonrpc` WebSocket.
enum WebPage {
    static let html = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <meta name="color-scheme" content="light dark">
    <title>Haul</title>
    <link rel="icon" href="data:,">
    <style>
    :root {
      --bg: #f4f5f8;
      --surface: #ffffff;
      --surface-2: #f8f9fb;
      --border: #e3e6ec;
      --text: #17191f;
      --muted: #6b7280;
      --faint: #9aa1ad;
      --accent: #3b6cf6;
      --accent-hover: #2f5be0;
      --accent-soft: rgba(59, 108, 246, .12);
      --track: #e9ecf2;
      --green: #14965a;  --green-soft: rgba(20, 150, 90, .12);
      --amber: #b7791f;  --amber-soft: rgba(215, 140, 20, .14);
      --red: #d23f3f;    --red-soft: rgba(210, 63, 63, .11);
      --grey: #6b7280;   --grey-soft: rgba(107, 114, 128, .12);
      --shadow: 0 1px 2px rgba(16, 24, 40, .05), 0 1px 3px rgba(16, 24, 40, .06);
      --radius: 12px;
      --mono: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace;
    }
    @media (prefers-color-scheme: dark) {
      :root {
        --bg: #0f1115;
        --surface: #171a21;
        --surface-2: #1c2029;
        --border: #2a2f3a;
        --text: #e8eaf0;
        --muted: #9aa2b1;
        --faint: #6b7383;
        --accent: #6d93ff;
        --accent-hover: #84a4ff;
        --accent-soft: rgba(109, 147, 255, .16);
        --track: #262b36;
        --green: #3ecf8e;  --green-soft: rgba(62, 207, 142, .14);
        --amber: #f0b45a;  --amber-soft: rgba(240, 180, 90, .15);
        --red: #ff6b6b;    --red-soft: rgba(255, 107, 107, .14);
        --grey: #9aa2b1;   --grey-soft: rgba(154, 162, 177, .14);
        --shadow: 0 1px 2px rgba(0, 0, 0, .3);
      }
    }
    * { box-sizing: border-box; }
    html { -webkit-text-size-adjust: 100%; }
    body {
      margin: 0;
      background: var(--bg);
      color: var(--text);
      font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Ubuntu, Cantarell, "Noto Sans", Arial, sans-serif;
      -webkit-font-smoothing: antialiased;
    }
    button, input, textarea { font: inherit; color: inherit; }
    svg { display: block; flex: none; }
    [hidden] { display: none !important; }

    /* ---------- header ---------- */
    .top {
      position: sticky; top: 0; z-index: 5;
      background: color-mix(in srgb, var(--bg) 82%, transparent);
      backdrop-filter: saturate(1.4) blur(10px);
      -webkit-backdrop-filter: saturate(1.4) blur(10px);
      border-bottom: 1px solid var(--border);
    }
    .wrap { max-width: 960px; margin: 0 auto; padding: 0 20px; }
    .top .wrap { display: flex; align-items: center; gap: 16px; min-height: 60px; flex-wrap: wrap; padding-top: 8px; padding-bottom: 8px; }
    .brand { display: flex; align-items: center; gap: 10px; font-weight: 650; font-size: 17px; letter-spacing: -.01em; }
    .logo { width: 30px; height: 30px; border-radius: 8px; background: linear-gradient(135deg, #4f7dff, #7b5cff); color: #fff; display: grid; place-items: center; box-shadow: 0 2px 6px rgba(79, 125, 255, .35); }
    .conn { display: inline-flex; align-items: center; gap: 6px; font-size: 12px; color: var(--muted); padding: 3px 9px; border-radius: 999px; background: var(--surface); border: 1px solid var(--border); white-space: nowrap; }
    .conn i { width: 7px; height: 7px; border-radius: 50%; background: var(--faint); }
    .conn.ok i { background: var(--green); box-shadow: 0 0 0 3px var(--green-soft); }
    .conn.bad { color: var(--amber); border-color: color-mix(in srgb, var(--amber) 35%, var(--border)); }
    .conn.bad i { background: var(--amber); animation: pulse 1.2s ease-in-out infinite; }
    @keyframes pulse { 50% { opacity: .3; } }
    .card.offline { display: flex; align-items: center; gap: 10px; padding: 10px 14px; margin-bottom: 16px; font-size: 13px; color: var(--amber); border-color: color-mix(in srgb, var(--amber) 40%, var(--border)); background: color-mix(in srgb, var(--amber-soft) 55%, var(--surface)); }
    .offline i { width: 8px; height: 8px; border-radius: 50%; background: var(--amber); flex: none; animation: pulse 1.2s ease-in-out infinite; }
    .offline span { flex: 1; }
    .offline .btn { height: 28px; font-size: 12.5px; }
    body[data-connected="false"] .stats, body[data-connected="false"] #listCard, body[data-connected="false"] .list-head { opacity: .55; transition: opacity .3s; }
    .stats { display: flex; align-items: center; gap: 14px; margin-left: auto; color: var(--muted); font-size: 13px; white-space: nowrap; }
    .speed { display: inline-flex; align-items: center; gap: 5px; color: var(--text); font-weight: 600; font-variant-numeric: tabular-nums; }
    .speed svg { color: var(--accent); }
    .counts b { color: var(--text); font-weight: 600; font-variant-numeric: tabular-nums; }
    .actions { display: flex; gap: 6px; }

    .btn {
      display: inline-flex; align-items: center; gap: 6px;
      height: 32px; padding: 0 12px; border-radius: 8px;
      border: 1px solid var(--border); background: var(--surface); color: var(--text);
      font-size: 13px; font-weight: 500; cursor: pointer; white-space: nowrap;
      box-shadow: var(--shadow);
      transition: background .15s, border-color .15s, color .15s, opacity .15s;
    }
    .btn:hover { background: var(--surface-2); border-color: color-mix(in srgb, var(--text) 18%, var(--border)); }
    .btn:disabled { opacity: .5; cursor: default; }
    .btn.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
    .btn.primary:hover { background: var(--accent-hover); border-color: var(--accent-hover); }
    .btn:focus-visible, .icon-btn:focus-visible, input:focus-visible, textarea:focus-visible { outline: 2px solid var(--accent); outline-offset: 2px; }

    main.wrap { padding-top: 22px; padding-bottom: 48px; }

    /* ---------- auth / add ---------- */
    .card { background: var(--surface); border: 1px solid var(--border); border-radius: var(--radius); box-shadow: var(--shadow); }
    .card.auth { display: flex; align-items: center; gap: 12px; flex-wrap: wrap; padding: 14px 16px; margin-bottom: 16px; border-color: color-mix(in srgb, var(--amber) 45%, var(--border)); background: color-mix(in srgb, var(--amber-soft) 60%, var(--surface)); }
    .auth p { margin: 0; flex: 1 1 220px; }
    .auth p small { display: block; color: var(--muted); }
    .auth form { display: flex; gap: 8px; flex: 1 1 280px; }
    .field { flex: 1; min-width: 0; height: 34px; padding: 0 10px; border: 1px solid var(--border); border-radius: 8px; background: var(--surface); }
    .field::placeholder, textarea::placeholder { color: var(--faint); }

    .add { padding: 14px; margin-bottom: 22px; }
    .add textarea {
      display: block; width: 100%; min-height: 44px; height: 44px; max-height: 200px; resize: vertical;
      padding: 11px 12px; border: 1px solid var(--border); border-radius: 9px; background: var(--surface-2);
      font-family: var(--mono); font-size: 13px; line-height: 1.5; transition: border-color .15s, background .15s;
    }
    .add textarea:focus { background: var(--surface); border-color: var(--accent); outline: none; box-shadow: 0 0 0 3px var(--accent-soft); }
    .add-row { display: flex; gap: 8px; margin-top: 10px; align-items: center; }
    .dir { position: relative; flex: 1; min-width: 0; }
    .dir svg { position: absolute; left: 10px; top: 50%; transform: translateY(-50%); color: var(--faint); pointer-events: none; }
    .dir .field { width: 100%; padding-left: 32px; background: var(--surface-2); }
    .dir .field:focus { background: var(--surface); border-color: var(--accent); outline: none; box-shadow: 0 0 0 3px var(--accent-soft); }
    .add .btn.primary { height: 34px; padding: 0 16px; }
    .add-msg { font-size: 12.5px; color: var(--muted); margin: 8px 2px 0; min-height: 0; }
    .add-msg.err { color: var(--red); }

    /* ---------- list ---------- */
    .list-head { display: flex; align-items: baseline; justify-content: space-between; margin: 0 2px 10px; }
    .list-head h2 { margin: 0; font-size: 13px; font-weight: 600; letter-spacing: .04em; text-transform: uppercase; color: var(--muted); }
    .list-head span { font-size: 12.5px; color: var(--faint); }
    ul.list { list-style: none; margin: 0; padding: 0; overflow: hidden; }
    .dl { display: grid; grid-template-columns: 36px minmax(0, 1fr) auto; gap: 4px 14px; align-items: center; padding: 14px 16px; border-top: 1px solid var(--border); }
    .dl.enter { animation: rowin .25s ease-out; }
    .dl:first-child { border-top: 0; }
    @keyframes rowin { from { opacity: 0; transform: translateY(-3px); } }
    .ico { width: 36px; height: 36px; border-radius: 10px; display: grid; place-items: center; background: var(--accent-soft); color: var(--accent); grid-row: span 1; }
    .body { min-width: 0; }
    .line1 { display: flex; align-items: center; gap: 10px; min-width: 0; }
    .name { font-weight: 560; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; min-width: 0; }
    .badge { flex: none; font-size: 11px; font-weight: 600; letter-spacing: .02em; padding: 1px 8px; border-radius: 999px; background: var(--accent-soft); color: var(--accent); text-transform: capitalize; }
    .bar { position: relative; height: 6px; margin: 9px 0 7px; border-radius: 999px; background: var(--track); overflow: hidden; }
    .fill { position: absolute; inset: 0 auto 0 0; width: 0; border-radius: inherit; background: var(--accent); transition: width .6s cubic-bezier(.2, .7, .3, 1), background-color .3s; }
    .dl[data-status="active"] .fill::after {
      content: ""; position: absolute; inset: 0;
      background: linear-gradient(90deg, transparent, rgba(255, 255, 255, .35), transparent);
      animation: shimmer 1.6s linear infinite; transform: translateX(-100%);
    }
    @keyframes shimmer { to { transform: translateX(100%); } }
    .meta { display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 12.5px; color: var(--muted); font-variant-numeric: tabular-nums; }
    .meta .pct { color: var(--text); font-weight: 600; min-width: 3.2em; }
    .meta span:empty { display: none; }
    .err { margin-top: 6px; font-size: 12.5px; color: var(--red); display: flex; gap: 6px; align-items: flex-start; overflow-wrap: anywhere; }
    .err svg { margin-top: 2px; }
    .ops { display: flex; gap: 4px; }
    .icon-btn { width: 34px; height: 34px; border-radius: 9px; border: 1px solid transparent; background: transparent; color: var(--muted); display: grid; place-items: center; cursor: pointer; transition: background .15s, color .15s, border-color .15s; }
    .icon-btn:hover { background: var(--surface-2); border-color: var(--border); color: var(--text); }
    .icon-btn.danger:hover { color: var(--red); background: var(--red-soft); border-color: transparent; }
    .icon-btn:disabled { opacity: .4; cursor: default; }
    .icon-btn.gone { visibility: hidden; }

    /* status colours */
    .dl[data-status="waiting"] .ico, .dl[data-status="waiting"] .badge { background: var(--grey-soft); color: var(--grey); }
    .dl[data-status="waiting"] .fill { background: var(--faint); }
    .dl[data-status="paused"] .ico, .dl[data-status="paused"] .badge { background: var(--amber-soft); color: var(--amber); }
    .dl[data-status="paused"] .fill { background: var(--amber); }
    .dl[data-status="complete"] .ico, .dl[data-status="complete"] .badge { background: var(--green-soft); color: var(--green); }
    .dl[data-status="complete"] .fill { background: var(--green); }
    .dl[data-status="error"] .ico, .dl[data-status="error"] .badge { background: var(--red-soft); color: var(--red); }
    .dl[data-status="error"] .fill { background: var(--red); }
    .dl[data-status="removed"] .ico, .dl[data-status="removed"] .badge { background: var(--grey-soft); color: var(--grey); }
    .dl[data-status="removed"] .fill { background: var(--faint); }
    .dl[data-status="removed"] .name { color: var(--muted); text-decoration: line-through; text-decoration-color: var(--faint); }

    .empty { padding: 48px 20px 52px; text-align: center; color: var(--muted); }
    .empty .art { width: 64px; height: 64px; margin: 0 auto 14px; border-radius: 18px; display: grid; place-items: center; background: var(--accent-soft); color: var(--accent); }
    .empty h3 { margin: 0 0 4px; font-size: 15px; font-weight: 600; color: var(--text); }
    .empty p { margin: 0; font-size: 13px; }

    .toast { position: fixed; left: 50%; bottom: 20px; transform: translate(-50%, 20px); opacity: 0; pointer-events: none; max-width: calc(100% - 32px); padding: 10px 14px; border-radius: 10px; background: var(--text); color: var(--bg); font-size: 13px; box-shadow: 0 8px 24px rgba(0, 0, 0, .2); transition: opacity .2s, transform .2s; z-index: 10; }
    .toast.show { opacity: 1; transform: translate(-50%, 0); }

    @media (prefers-reduced-motion: reduce) {
      *, *::before, *::after { animation: none !important; transition: none !important; }
    }
    @media (max-width: 720px) {
      .top .wrap { gap: 6px 10px; }
      .brand { flex: 1 1 auto; min-width: 0; }
      .conn { min-width: 0; overflow: hidden; }
      .conn span { overflow: hidden; text-overflow: ellipsis; }
      .actions { order: 1; }
      .stats { order: 2; flex: 1 1 100%; margin-left: 0; }
      .btn .lbl { display: none; }
      .actions .btn { padding: 0 9px; }
    }
    @media (max-width: 520px) {
      .wrap { padding: 0 12px; }
      main.wrap { padding-top: 14px; }
      .add { padding: 12px; }
      .add-row { flex-wrap: wrap; }
      .dir { flex-basis: 100%; }
      .add .btn.primary { flex: 1; justify-content: center; }
      .dl { grid-template-columns: minmax(0, 1fr) auto; padding: 12px 12px 14px; gap: 0 6px; }
      .ico { display: none; }
      .body { display: contents; }
      .line1 { grid-column: 1; grid-row: 1; flex-wrap: wrap; gap: 2px 8px; }
      .name { white-space: normal; overflow-wrap: anywhere; display: -webkit-box; -webkit-line-clamp: 2; -webkit-box-orient: vertical; }
      .ops { grid-column: 2; grid-row: 1; gap: 0; margin: -4px -6px -4px 0; }
      .bar, .meta, .err { grid-column: 1 / -1; }
      .bar { margin-top: 8px; }
      .icon-btn { width: 32px; height: 32px; }
      .meta { gap: 2px 12px; }
    }
    </style>
    </head>
    <body data-connected="false">
    <header class="top">
      <div class="wrap">
        <div class="brand">
          <span class="logo" aria-hidden="true"><svg width="18" height="18" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.4" stroke-linecap="round" stroke-linejoin="round"><path d="M12 3v13"/><path d="m6.5 10.5 5.5 5.5 5.5-5.5"/><path d="M5 20h14"/></svg></span>
          Haul
          <span class="conn" id="conn" role="status" aria-live="polite"><i></i><span id="connText">Connecting…</span></span>
        </div>
        <div class="stats">
          <span class="speed" title="Total download speed"><svg width="14" height="14" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.6" stroke-linecap="round" stroke-linejoin="round"><path d="M12 4v15"/><path d="m6 13 6 6 6-6"/></svg><span id="gSpeed">0 B/s</span></span>
          <span class="counts"><b id="nActive">0</b> active<span class="long"> · <b id="nWaiting">0</b> waiting</span> · <b id="nStopped">0</b> stopped</span>
        </div>
        <div class="actions">
          <button class="btn" id="pauseAll" type="button" title="Pause all downloads"><svg width="14" height="14" viewBox="0 0 24 24" fill="currentColor"><rect x="6" y="4.5" width="4" height="15" rx="1.2"/><rect x="14" y="4.5" width="4" height="15" rx="1.2"/></svg><span class="lbl">Pause all</span></button>
          <button class="btn" id="resumeAll" type="button" title="Resume all downloads"><svg width="14" height="14" viewBox="0 0 24 24" fill="currentColor"><path d="M7 4.8v14.4a1 1 0 0 0 1.5.86l11.5-7.2a1 1 0 0 0 0-1.72L8.5 3.94A1 1 0 0 0 7 4.8z"/></svg><span class="lbl">Resume all</span></button>
          <button class="btn" id="purge" type="button" title="Clear finished downloads from the list"><svg width="14" height="14" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.2" stroke-linecap="round" stroke-linejoin="round"><path d="M4 7h16"/><path d="M10 11v6M14 11v6"/><path d="M6 7l1 12a2 2 0 0 0 2 2h6a2 2 0 0 0 2-2l1-12"/><path d="M9 7V4h6v3"/></svg><span class="lbl">Clear finished</span></button>
        </div>
      </div>
    </header>

    <main class="wrap">
      <section class="card offline" id="offline" role="status" hidden>
        <i></i><span id="offlineText">Disconnected — retrying…</span>
        <button class="btn" id="retryNow" type="button">Retry now</button>
      </section>

      <section class="card auth" id="auth" hidden>
        <p><strong>This daemon needs its RPC secret.</strong><small id="authHint">Enter the secret it was started with.</small></p>
        <form id="authForm" autocomplete="off">
          <input class="field" id="authInput" type="password" placeholder="Secret" aria-label="RPC secret" required>
          <button class="btn primary" type="submit">Connect</button>
        </form>
      </section>

      <section class="card add">
        <form id="addForm">
          <textarea id="urls" rows="1" spellcheck="false" autocomplete="off" placeholder="Paste one or more URLs, one per line" aria-label="URLs to download, one per line"></textarea>
          <div class="add-row">
            <label class="dir">
              <svg width="15" height="15" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round"><path d="M3 7a2 2 0 0 1 2-2h4l2 2h8a2 2 0 0 1 2 2v8a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2z"/></svg>
              <input class="field" id="dir" type="text" spellcheck="false" autocomplete="off" placeholder="Save to folder (optional)" aria-label="Output folder (optional)">
            </label>
            <button class="btn primary" id="addBtn" type="submit"><svg width="15" height="15" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.6" stroke-linecap="round"><path d="M12 5v14M5 12h14"/></svg>Add</button>
          </div>
          <p class="add-msg" id="addMsg" hidden></p>
        </form>
      </section>

      <div class="list-head"><h2>Downloads</h2><span id="listCount"></span></div>
      <section class="card" id="listCard">
        <ul class="list" id="list" aria-label="Downloads"></ul>
        <div class="empty" id="empty">
          <div class="art"><svg width="30" height="30" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round"><path d="M12 3v12"/><path d="m7 10 5 5 5-5"/><path d="M4 15v3a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2v-3"/></svg></div>
          <h3>No downloads yet — paste a URL above</h3>
          <p>Downloads resume where they left off if the connection drops.</p>
        </div>
      </section>
    </main>
    <div class="toast" id="toast" role="alert"></div>

    <script>
    (function () {
      "use strict";

      // ---------- connection settings ----------
      var params = new URLSearchParams(location.search);
      var RPC_URL = params.get("rpc") ||
        ((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/jsonrpc");
      var TOKEN_KEY = "haul.rpcSecret";
      var DIR_KEY = "haul.lastDir";
      var POLL_MS = 500;

      function storageGet(k) { try { return localStorage.getItem(k); } catch (e) { return null; } }
      function storageSet(k, v) { try { if (v == null || v === "") localStorage.removeItem(k); else localStorage.setItem(k, v); } catch (e) {} }

      var secret = storageGet(TOKEN_KEY);
      // "#token=SECRET" in the address: keep it in localStorage and take it out of the address bar.
      function takeTokenFromFragment() {
        var hash = location.hash.replace(/^#/, "");
        if (!hash) return false;
        var frag = new URLSearchParams(hash);
        if (!frag.has("token")) return false;
        secret = frag.get("token");
        storageSet(TOKEN_KEY, secret);
        frag.delete("token");
        var rest = frag.toString();
        try { history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : "")); } catch (e) {}
        return true;
      }
      takeTokenFromFragment();

      function withToken(args) {
        var p = secret ? ["token:" + secret] : [];
        return p.concat(args || []);
      }

      // ---------- DOM helpers ----------
      var $ = function (id) { return document.getElementById(id); };
      var SVGNS = "http://www.w3.org/2000/svg";
      // Icons are static markup owned by this page (never server data).
      var ICONS = {
        pause: '<svg width="16" height="16" viewBox="0 0 24 24" fill="currentColor"><rect x="6" y="4.5" width="4" height="15" rx="1.2"/><rect x="14" y="4.5" width="4" height="15" rx="1.2"/></svg>',
        play: '<svg width="16" height="16" viewBox="0 0 24 24" fill="currentColor"><path d="M7 4.8v14.4a1 1 0 0 0 1.5.86l11.5-7.2a1 1 0 0 0 0-1.72L8.5 3.94A1 1 0 0 0 7 4.8z"/></svg>',
        x: '<svg width="16" height="16" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.2" stroke-linecap="round"><path d="M6 6l12 12M18 6 6 18"/></svg>',
        active: '<svg width="18" height="18" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.2" stroke-linecap="round" stroke-linejoin="round"><path d="M12 4v12"/><path d="m7 11 5 5 5-5"/><path d="M5 20h14"/></svg>',
        waiting: '<svg width="18" height="18" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.2" stroke-linecap="round" stroke-linejoin="round"><circle cx="12" cy="12" r="8.5"/><path d="M12 7.5V12l3 2"/></svg>',
        paused: '<svg width="18" height="18" viewBox="0 0 24 24" fill="currentColor"><rect x="6.5" y="5" width="4" height="14" rx="1.2"/><rect x="13.5" y="5" width="4" height="14" rx="1.2"/></svg>',
        complete: '<svg width="18" height="18" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.6" stroke-linecap="round" stroke-linejoin="round"><path d="m5 12.5 4.5 4.5L19 7.5"/></svg>',
        error: '<svg width="18" height="18" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.4" stroke-linecap="round"><path d="M12 7v6"/><path d="M12 17h.01"/><circle cx="12" cy="12" r="9"/></svg>',
        removed: '<svg width="18" height="18" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.2" stroke-linecap="round"><circle cx="12" cy="12" r="8.5"/><path d="M8 12h8"/></svg>',
        warn: '<svg width="13" height="13" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.6" stroke-linecap="round"><path d="M12 8v5"/><path d="M12 16.5h.01"/><circle cx="12" cy="12" r="9.5"/></svg>'
      };
      var iconCache = {};
      function icon(name) {
        if (!iconCache[name]) {
          var t = document.createElement("template");
          t.innerHTML = ICONS[name] || ICONS.waiting;
          iconCache[name] = t.content.firstChild;
        }
        return iconCache[name].cloneNode(true);
      }
      function el(tag, cls, text) {
        var e = document.createElement(tag);
        if (cls) e.className = cls;
        if (text != null) e.textContent = text;
        return e;
      }
      function setText(e, s) { s = s == null ? "" : String(s); if (e.textContent !== s) e.textContent = s; }
      function setAttr(e, k, v) { v = String(v); if (e.getAttribute(k) !== v) e.setAttribute(k, v); }

      var toastTimer;
      function toast(msg) {
        var t = $("toast");
        t.textContent = msg;
        t.classList.add("show");
        clearTimeout(toastTimer);
        toastTimer = setTimeout(function () { t.classList.remove("show"); }, 4000);
      }

      // ---------- formatting ----------
      function num(s) { var n = Number(s); return isFinite(n) && n > 0 ? n : 0; }
      var UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
      function bytes(n) {
        n = num(n);
        if (n < 1024) return Math.round(n) + " B";
        var i = 0;
        while (n >= 1024 && i < UNITS.length - 1) { n /= 1024; i++; }
        return (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2)) + " " + UNITS[i];
      }
      function speed(n) { return bytes(n) + "/s"; }
      function duration(s) {
        s = Math.max(0, Math.round(s));
        if (s < 60) return s + "s";
        var m = Math.floor(s / 60);
        if (m < 60) return m + "m " + (s % 60) + "s";
        var h = Math.floor(m / 60);
        if (h < 48) return h + "h " + (m % 60) + "m";
        return Math.floor(h / 24) + "d " + (h % 24) + "h";
      }
      function percentOf(d) {
        if (d.status === "complete") return 100;
        var total = num(d.totalLength), done = num(d.completedLength);
        if (!total) return 0;
        return Math.max(0, Math.min(100, Math.floor(done * 100 / total)));
      }
      function lastSegment(uri) {
        try {
          var u = new URL(uri);
          var parts = u.pathname.split("/").filter(Boolean);
          var seg = parts.length ? parts[parts.length - 1] : u.host;
          try { seg = decodeURIComponent(seg); } catch (e) {}
          return seg || uri;
        } catch (e) {
          var p = String(uri).split("?")[0].split("#")[0].split("/").filter(Boolean);
          return p.length ? p[p.length - 1] : String(uri);
        }
      }
      function firstUri(d) {
        var f = d.files && d.files[0];
        if (f && f.uris && f.uris.length) return f.uris[0].uri || "";
        return "";
      }
      function nameOf(d) {
        var f = d.files && d.files[0];
        if (f && f.path) {
          var p = String(f.path).split(/[\\/]/).filter(Boolean);
          if (p.length) return p[p.length - 1];
        }
        if (d.bittorrent && d.bittorrent.info && d.bittorrent.info.name) return d.bittorrent.info.name;
        var u = firstUri(d);
        return u ? lastSegment(u) : "Download " + d.gid;
      }
      var STATUS_LABEL = { active: "Downloading", waiting: "Queued", paused: "Paused", complete: "Complete", error: "Error", removed: "Removed" };
      var STATUS_RANK = { active: 0, waiting: 1, paused: 2, complete: 3, error: 4, removed: 5 };

      // ---------- JSON-RPC over WebSocket ----------
      var ws = null, nextId = 1, pending = {}, retryDelay = 500, retryTimer = null, countdownTimer = null;
      var needAuth = false, useMulticall = true;

      function rpcError(err) {
        var e = new Error((err && (err.message || err.faultString)) || "RPC error");
        e.code = err && (err.code != null ? err.code : err.faultCode);
        return e;
      }
      function isUnauthorized(e) { return e && /unauthori[sz]ed/i.test(e.message || ""); }

      function call(method, args) {
        return new Promise(function (resolve, reject) {
          if (!ws || ws.readyState !== WebSocket.OPEN) { reject(new Error("Not connected")); return; }
          var id = String(nextId++);
          var timer = setTimeout(function () {
            if (pending[id]) { delete pending[id]; reject(new Error("Request timed out")); }
          }, 15000);
          pending[id] = { resolve: resolve, reject: reject, timer: timer };
          var msg = { jsonrpc: "2.0", id: id, method: method };
          if (args && args.length) msg.params = args;
          try { ws.send(JSON.stringify(msg)); }
          catch (e) { clearTimeout(timer); delete pending[id]; reject(e); }
        });
      }
      // An aria2 method that takes the secret first.
      function aria(method) {
        return call(method, withToken(Array.prototype.slice.call(arguments, 1)))
          .catch(function (e) { if (isUnauthorized(e)) showAuth(true); throw e; });
      }

      function setConn(state, text, detail) {
        var c = $("conn");
        c.className = "conn " + state;
        setText($("connText"), text);
        document.body.dataset.connected = state === "ok" ? "true" : "false";
        $("offline").hidden = !detail;
        if (state !== "ok") ["pauseAll", "resumeAll", "purge"].forEach(function (id) { $(id).disabled = true; });
        if (detail) setText($("offlineText"), detail);
      }

      var everConnected = false;
      function connect() {
        clearTimeout(retryTimer); clearInterval(countdownTimer);
        if (everConnected) setConn("bad", "Offline", "Disconnected — retrying now…");
        else setConn("", "Connecting…");
        var sock;
        try { sock = new WebSocket(RPC_URL); }
        catch (e) { scheduleReconnect(); return; }
        ws = sock;
        sock.onopen = function () {
          if (ws !== sock) return;
          retryDelay = 500;
          everConnected = true;
          needAuth = false; // try again after a reconnect; the form stays up until a call succeeds
          setConn("ok", "Live");
          refreshNow();
        };
        sock.onmessage = function (ev) {
          if (ws !== sock) return;
          var msg;
          try { msg = JSON.parse(ev.data); } catch (e) { return; }
          var list = Array.isArray(msg) ? msg : [msg];
          list.forEach(handleMessage);
        };
        sock.onclose = function () {
          if (ws !== sock) return;
          ws = null;
          Object.keys(pending).forEach(function (id) {
            var p = pending[id]; delete pending[id];
            clearTimeout(p.timer); p.reject(new Error("Connection lost"));
          });
          scheduleReconnect();
        };
        sock.onerror = function () { /* onclose follows */ };
      }

      function scheduleReconnect() {
        clearTimeout(pollTimer);
        var delay = retryDelay;
        retryDelay = Math.min(retryDelay * 2, 15000);
        var until = Date.now() + delay;
        var tick = function () {
          var left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
          setConn("bad", "Offline", left > 0 ? "Disconnected — retrying in " + left + "s" : "Disconnected — retrying…");
        };
        tick();
        clearInterval(countdownTimer);
        countdownTimer = setInterval(tick, 1000);
        retryTimer = setTimeout(function () { clearInterval(countdownTimer); connect(); }, delay);
      }

      function handleMessage(msg) {
        if (!msg || typeof msg !== "object") return;
        if (msg.id != null && pending[msg.id]) {
          var p = pending[msg.id];
          delete pending[msg.id];
          clearTimeout(p.timer);
          if (msg.error) p.reject(rpcError(msg.error)); else p.resolve(msg.result);
          return;
        }
        if (typeof msg.method === "string" && /^aria2\.onDownload/.test(msg.method)) refreshSoon();
      }

      // ---------- polling ----------
      var pollTimer = null, polling = false, pollAgain = false;

      function refreshNow() { clearTimeout(pollTimer); pollTimer = setTimeout(poll, 0); }
      function refreshSoon() {
        if (polling) { pollAgain = true; return; }
        clearTimeout(pollTimer); pollTimer = setTimeout(poll, 40);
      }

      function fetchState() {
        var calls = [
          ["aria2.tellActive", []],
          ["aria2.tellWaiting", [0, 1000]],
          ["aria2.tellStopped", [0, 1000]],
          ["aria2.getGlobalStat", []]
        ];
        if (useMulticall) {
          var batch = calls.map(function (c) { return { methodName: c[0], params: withToken(c[1]) }; });
          return call("system.multicall", [batch]).then(function (res) {
            if (!Array.isArray(res)) throw new Error("Unexpected multicall answer");
            return res.map(function (r) {
              if (Array.isArray(r)) return r[0];
              throw rpcError(r);
            });
          }, function (e) {
            if (e.code === -32601 || /method not found|no such method/i.test(e.message)) {
              useMulticall = false;
              return fetchState();
            }
            throw e;
          });
        }
        return Promise.all(calls.map(function (c) { return call(c[0], withToken(c[1])); }));
      }

      function poll() {
        clearTimeout(pollTimer);
        if (!ws || ws.readyState !== WebSocket.OPEN || needAuth) return;
        if (polling) { pollAgain = true; return; }
        polling = true;
        fetchState().then(function (r) {
          showAuth(false);
          render(r[0] || [], r[1] || [], r[2] || [], r[3] || {});
        }, function (e) {
          if (isUnauthorized(e)) showAuth(true);
        }).then(function () {
          polling = false;
          if (!ws || needAuth) return;
          var again = pollAgain; pollAgain = false;
          pollTimer = setTimeout(poll, again ? 0 : POLL_MS);
        });
      }

      // ---------- auth ----------
      function showAuth(on) {
        if (on === needAuth && $("auth").hidden === !on) return;
        needAuth = on;
        $("auth").hidden = !on;
        if (on) {
          setText($("authHint"), secret ? "The saved secret was not accepted — enter it again." : "Enter the secret it was started with.");
          if (document.activeElement !== $("authInput")) $("authInput").focus();
        }
      }
      $("authForm").addEventListener("submit", function (ev) {
        ev.preventDefault();
        var v = $("authInput").value.trim();
        if (!v) return;
        secret = v;
        storageSet(TOKEN_KEY, v);
        $("authInput").value = "";
        needAuth = false;
        $("auth").hidden = true;
        refreshNow();
      });

      // ---------- rendering ----------
      var rows = new Map(); // gid -> { el, parts }
      var firstRender = true; // rows present at load appear at once; later ones fade in

      function makeRow(gid) {
        var li = el("li", "dl");
        li.dataset.gid = gid;
        if (!firstRender) {
          li.classList.add("enter");
          li.addEventListener("animationend", function () { li.classList.remove("enter"); }, { once: true });
        }
        var ico = el("div", "ico");
        ico.setAttribute("aria-hidden", "true");
        var body = el("div", "body");
        var line1 = el("div", "line1");
        var name = el("span", "name");
        var badge = el("span", "badge");
        line1.append(name, badge);
        var bar = el("div", "bar");
        bar.setAttribute("role", "progressbar");
        bar.setAttribute("aria-valuemin", "0");
        bar.setAttribute("aria-valuemax", "100");
        var fill = el("div", "fill");
        bar.append(fill);
        var meta = el("div", "meta");
        var pct = el("span", "pct"), size = el("span", "size"), spd = el("span", "spd"), eta = el("span", "eta");
        meta.append(pct, size, spd, eta);
        var err = el("div", "err");
        err.append(icon("warn"));
        var errText = el("span");
        err.append(errText);
        err.hidden = true;
        body.append(line1, bar, meta, err);

        var ops = el("div", "ops");
        var toggle = el("button", "icon-btn");
        toggle.type = "button";
        var remove = el("button", "icon-btn danger");
        remove.type = "button";
        remove.append(icon("x"));
        ops.append(toggle, remove);

        li.append(ico, body, ops);
        var row = { el: li, ico: ico, name: name, badge: badge, bar: bar, fill: fill, pct: pct, size: size, spd: spd, eta: eta, err: err, errText: errText, toggle: toggle, remove: remove, data: null, iconFor: "", toggleMode: "" };

        toggle.addEventListener("click", function () {
          var d = row.data; if (!d) return;
          var method = d.status === "paused" ? "aria2.unpause" : "aria2.pause";
          act(toggle, aria(method, d.gid), method === "aria2.pause" ? "Could not pause" : "Could not resume");
        });
        remove.addEventListener("click", function () {
          var d = row.data; if (!d) return;
          var stopped = d.status === "complete" || d.status === "error" || d.status === "removed";
          act(remove, aria(stopped ? "aria2.removeDownloadResult" : "aria2.remove", d.gid), "Could not remove");
        });
        return row;
      }

      function act(button, promise, failText) {
        if (button) button.disabled = true;
        promise.then(function () {}, function (e) {
          if (!isUnauthorized(e)) toast(failText + ": " + e.message);
        }).then(function () {
          if (button) button.disabled = false;
          refreshNow();
        });
      }

      function updateRow(row, d) {
        row.data = d;
        var li = row.el, status = String(d.status || "waiting");
        var p = percentOf(d);
        var total = num(d.totalLength), done = num(d.completedLength), rate = num(d.downloadSpeed);

        setAttr(li, "data-status", status);
        setAttr(li, "data-percent", p);
        if (row.iconFor !== status) {
          row.iconFor = status;
          row.ico.replaceChildren(icon(status));
        }
        var name = nameOf(d);
        setText(row.name, name);
        var where = (d.files && d.files[0] && d.files[0].path) || firstUri(d) || name;
        setAttr(row.name, "title", where);
        setText(row.badge, STATUS_LABEL[status] || status);

        var w = p + "%";
        if (row.fill.style.width !== w) row.fill.style.width = w;
        setAttr(row.bar, "aria-valuenow", p);
        setAttr(row.bar, "aria-label", name + " progress");
        setText(row.pct, p + "%");

        if (status === "complete") setText(row.size, bytes(total || done));
        else if (total) setText(row.size, bytes(done) + " of " + bytes(total));
        else setText(row.size, done ? bytes(done) : "");

        if (status === "active") {
          setText(row.spd, speed(rate));
          var left = total - done;
          setText(row.eta, rate > 0 && total > 0 ? duration(left / rate) + " left" : total ? "—" : "");
        } else {
          setText(row.spd, "");
          setText(row.eta, status === "waiting" ? "Waiting for a free slot" : "");
        }

        var showErr = status === "error";
        if (showErr) {
          var msg = d.errorMessage || (d.errorCode && d.errorCode !== "0" ? "Error code " + d.errorCode : "Download failed");
          setText(row.errText, msg);
        }
        if (row.err.hidden === showErr) row.err.hidden = !showErr;

        var mode = status === "paused" ? "resume" : (status === "active" || status === "waiting") ? "pause" : "none";
        if (row.toggleMode !== mode) {
          row.toggleMode = mode;
          row.toggle.classList.toggle("gone", mode === "none");
          row.toggle.tabIndex = mode === "none" ? -1 : 0;
          if (mode !== "none") {
            row.toggle.replaceChildren(icon(mode === "resume" ? "play" : "pause"));
            var label = mode === "resume" ? "Resume" : "Pause";
            row.toggle.title = label;
            row.toggle.setAttribute("aria-label", label + " " + name);
          }
        }
        var stopped = status === "complete" || status === "error" || status === "removed";
        var rl = stopped ? "Remove from list" : "Cancel download";
        setAttr(row.remove, "title", rl);
        setAttr(row.remove, "aria-label", rl + " " + name);
      }

      function render(active, waiting, stopped, stat) {
        var all = [].concat(active, waiting, stopped).map(function (d, i) { return { d: d, i: i }; });
        all.sort(function (a, b) {
          var ra = STATUS_RANK[a.d.status], rb = STATUS_RANK[b.d.status];
          ra = ra == null ? 9 : ra; rb = rb == null ? 9 : rb;
          return ra - rb || a.i - b.i;
        });
        var list = $("list"), seen = new Set();
        var cursor = list.firstElementChild;
        all.forEach(function (item) {
          var d = item.d, gid = String(d.gid);
          if (seen.has(gid)) return;
          seen.add(gid);
          var row = rows.get(gid);
          if (!row) { row = makeRow(gid); rows.set(gid, row); }
          updateRow(row, d);
          if (row.el === cursor) cursor = cursor.nextElementSibling;
          else list.insertBefore(row.el, cursor);
        });
        rows.forEach(function (row, gid) {
          if (!seen.has(gid)) { row.el.remove(); rows.delete(gid); }
        });
        firstRender = false;
        $("empty").hidden = seen.size > 0;
        setText($("listCount"), seen.size ? seen.size + (seen.size === 1 ? " item" : " items") : "");

        // aria2's global speed is a moving average that lingers after the last download stops.
        setText($("gSpeed"), speed(num(stat.numActive) ? stat.downloadSpeed : 0));
        setText($("nActive"), num(stat.numActive));
        setText($("nWaiting"), num(stat.numWaiting));
        setText($("nStopped"), num(stat.numStopped));
        var hasFinished = stopped.length > 0;
        $("purge").disabled = !hasFinished;
        $("pauseAll").disabled = !(active.length || waiting.some(function (d) { return d.status === "waiting"; }));
        $("resumeAll").disabled = !waiting.some(function (d) { return d.status === "paused"; });
      }

      // ---------- header actions ----------
      $("pauseAll").addEventListener("click", function () { act(this, aria("aria2.pauseAll"), "Could not pause all"); });
      $("resumeAll").addEventListener("click", function () { act(this, aria("aria2.unpauseAll"), "Could not resume all"); });
      $("purge").addEventListener("click", function () { act(this, aria("aria2.purgeDownloadResult"), "Could not clear finished downloads"); });

      // ---------- add ----------
      var urls = $("urls"), dirInput = $("dir"), addMsg = $("addMsg");
      dirInput.value = storageGet(DIR_KEY) || "";
      function autosize() {
        urls.style.height = "auto";
        urls.style.height = Math.min(200, Math.max(44, urls.scrollHeight + 2)) + "px";
      }
      urls.addEventListener("input", autosize);
      urls.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter" && (ev.metaKey || ev.ctrlKey)) { ev.preventDefault(); $("addForm").requestSubmit(); }
      });
      function say(text, isErr) {
        addMsg.hidden = !text;
        addMsg.className = "add-msg" + (isErr ? " err" : "");
        addMsg.textContent = text || "";
      }
      $("addForm").addEventListener("submit", function (ev) {
        ev.preventDefault();
        var list = urls.value.split(/\r?\n/).map(function (s) { return s.trim(); }).filter(Boolean);
        if (!list.length) { say("Paste at least one URL.", true); urls.focus(); return; }
        var dir = dirInput.value.trim();
        storageSet(DIR_KEY, dir);
        var options = dir ? { dir: dir } : {};
        var btn = $("addBtn");
        btn.disabled = true;
        say("");
        Promise.all(list.map(function (u) {
          return aria("aria2.addUri", [u], options).then(function () { return null; }, function (e) { return { url: u, error: e }; });
        })).then(function (results) {
          var failed = results.filter(Boolean);
          if (!failed.length) {
            urls.value = "";
            say("");
          } else {
            urls.value = failed.map(function (f) { return f.url; }).join("\n");
            var first = failed[0].error;
            say(failed.length === list.length
              ? "Could not add: " + first.message
              : "Added " + (list.length - failed.length) + " of " + list.length + ". The rest failed: " + first.message, true);
          }
          autosize();
        }).then(function () { btn.disabled = false; refreshNow(); });
      });

      $("retryNow").addEventListener("click", function () {
        if (!ws) { retryDelay = 500; connect(); }
      });
      window.addEventListener("hashchange", function () {
        if (takeTokenFromFragment()) { showAuth(false); refreshNow(); }
      });

      connect();
    })();
    </script>
    </body>
    </html>
    """#
}
