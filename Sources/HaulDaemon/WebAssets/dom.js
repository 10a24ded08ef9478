"use strict";

// Small DOM helpers. Nothing here parses strings as HTML: the page's
// Content-Security-Policy requires Trusted Types, so innerHTML would throw.
const Dom = (() => {
  const SVGNS = "http://www.w3.org/2000/svg";

  function $(id) { return document.getElementById(id); }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  // An icon from the sprite in index.html.
  function icon(name, size) {
    const svg = document.createElementNS(SVGNS, "svg");
    svg.setAttribute("width", String(size || 16));
    svg.setAttribute("height", String(size || 16));
    svg.setAttribute("aria-hidden", "true");
    const use = document.createElementNS(SVGNS, "use");
    use.setAttribute("href", "#i-" + name);
    svg.append(use);
    return svg;
  }

  function setText(e, s) { s = s == null ? "" : String(s); if (e.textContent !== s) e.textContent = s; }
  function setAttr(e, k, v) { v = String(v); if (e.getAttribute(k) !== v) e.setAttribute(k, v); }

  function iconButton(action, iconName, label, danger) {
    const b = el("button", "icon-btn" + (danger ? " danger" : ""));
    b.type = "button";
    b.dataset.action = action;
    b.title = label;
    b.setAttribute("aria-label", label);
    b.append(icon(iconName));
    return b;
  }

  function textButton(action, iconName, label, extraClass) {
    const b = el("button", "btn" + (extraClass ? " " + extraClass : ""));
    b.type = "button";
    b.dataset.action = action;
    if (iconName) b.append(icon(iconName, 14));
    b.append(document.createTextNode(label));
    return b;
  }

  // Rows of <dt>/<dd>; a value may be [text, className].
  function facts(dl, pairs) {
    const nodes = [];
    pairs.forEach(([term, value]) => {
      if (value == null || value === "") return;
      const [text, cls] = Array.isArray(value) ? value : [value, ""];
      nodes.push(el("dt", "", term), el("dd", cls, text));
    });
    dl.replaceChildren(...nodes);
  }

  let toastTimer;
  function toast(msg) {
    const t = $("toast");
    t.textContent = msg;
    t.classList.add("show");
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => t.classList.remove("show"), 5000);
  }

  return { $, el, icon, setText, setAttr, iconButton, textButton, facts, toast };
})();
