"use strict";

// aria2's JSON-RPC over the daemon's own WebSocket (/jsonrpc on the origin the page came
// from, and nowhere else): calls, multicalls, notifications, and reconnecting with backoff.
class Rpc {
  constructor() {
    this.url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/jsonrpc";
    this.secret = null;
    this.ws = null;
    this.nextId = 1;
    this.pending = new Map();
    this.retryDelay = 500;
    this.retryTimer = null;
    this.handlers = { open: [], close: [], notification: [] };
  }

  on(event, fn) { this.handlers[event].push(fn); }
  emit(event, arg) { this.handlers[event].forEach((fn) => fn(arg)); }
  get isOpen() { return !!this.ws && this.ws.readyState === WebSocket.OPEN; }

  connect() {
    clearTimeout(this.retryTimer);
    let sock;
    try { sock = new WebSocket(this.url); } catch (e) { this.scheduleReconnect(); return; }
    this.ws = sock;
    sock.onopen = () => {
      if (this.ws !== sock) return;
      this.retryDelay = 500;
      this.emit("open");
    };
    sock.onmessage = (ev) => { if (this.ws === sock) this.receive(ev.data); };
    sock.onclose = () => {
      if (this.ws !== sock) return;
      this.ws = null;
      this.pending.forEach((p) => { clearTimeout(p.timer); p.reject(new Error("Connection lost")); });
      this.pending.clear();
      this.scheduleReconnect();
    };
  }

  scheduleReconnect() {
    const delay = this.retryDelay;
    this.retryDelay = Math.min(delay * 2, 15000);
    this.retryTimer = setTimeout(() => this.connect(), delay);
    this.emit("close", Date.now() + delay);
  }

  reconnectNow() {
    if (this.ws) return;
    this.retryDelay = 500;
    this.connect();
  }

  receive(data) {
    let msg;
    try { msg = JSON.parse(data); } catch (e) { return; }
    (Array.isArray(msg) ? msg : [msg]).forEach((m) => {
      if (!m || typeof m !== "object") return;
      const p = m.id != null ? this.pending.get(String(m.id)) : null;
      if (p) {
        this.pending.delete(String(m.id));
        clearTimeout(p.timer);
        if (m.error) p.reject(Rpc.error(m.error)); else p.resolve(m.result);
      } else if (typeof m.method === "string") {
        this.emit("notification", m);
      }
    });
  }

  withToken(params) { return (this.secret ? ["token:" + this.secret] : []).concat(params); }

  // One request as given (no secret added).
  send(method, params) {
    return new Promise((resolve, reject) => {
      if (!this.isOpen) { reject(new Error("Not connected")); return; }
      const id = String(this.nextId++);
      const timer = setTimeout(() => {
        if (this.pending.delete(id)) reject(new Error("The daemon did not answer " + method + " in time"));
      }, 20000);
      this.pending.set(id, { resolve, reject, timer });
      const msg = { jsonrpc: "2.0", id, method };
      if (params && params.length) msg.params = params;
      try { this.ws.send(JSON.stringify(msg)); } catch (e) { clearTimeout(timer); this.pending.delete(id); reject(e); }
    });
  }

  // An aria2 method: the secret goes first.
  call(method, ...params) { return this.send(method, this.withToken(params)); }

  // Several aria2 calls in one message; each result is { value } or { error }.
  multicall(calls) {
    const batch = calls.map(([method, ...params]) => ({ methodName: method, params: this.withToken(params) }));
    return this.send("system.multicall", [batch]).then((results) => {
      if (!Array.isArray(results) || results.length !== calls.length) throw new Error("Unexpected multicall answer");
      return results.map((r) => (Array.isArray(r) ? { value: r[0] } : { error: Rpc.error(r) }));
    });
  }

  static error(err) {
    const e = new Error((err && (err.message || err.faultString)) || "RPC error");
    e.code = err && (err.code != null ? err.code : err.faultCode);
    return e;
  }

  static isUnauthorized(e) { return !!e && /unauthori[sz]ed/i.test(e.message || ""); }
}
