"use strict";

// The daemon-wide options: read with aria2.getGlobalOption when the dialog opens, and only
// the fields that were changed sent back with aria2.changeGlobalOption (which the daemon
// keeps for its next start). Rates and sizes show as 600K, not 614400.
//
// app: { rpc, refreshNow() }
function createSettings(app) {
  const { $, setText } = Dom;
  const dialog = $("settings"), form = $("settingsForm");
  const NAMES = ["max-concurrent-downloads", "max-overall-download-limit", "max-download-limit", "split", "max-tries", "retry-wait", "dir"];
  const SIZES = new Set(["max-overall-download-limit", "max-download-limit"]);
  let loaded = null;   // name -> the value as shown

  function shown(name, value) {
    if (value == null) return "";
    return SIZES.has(name) ? Fmt.sizeInput(value) : String(value);
  }

  function say(text, kind) {
    const msg = $("settingsMsg");
    msg.className = "hint wide" + (kind ? " " + kind : "");
    setText(msg, text || "");
  }

  function load() {
    loaded = null;
    delete dialog.dataset.loaded;
    return app.rpc.call("aria2.getGlobalOption").then((options) => {
      loaded = {};
      NAMES.forEach((name) => {
        loaded[name] = shown(name, (options || {})[name]);
        form.elements[name].value = loaded[name];
      });
      dialog.dataset.loaded = "true";
    }, (e) => say("Could not read the settings: " + e.message, "err"));
  }

  function open() {
    say("");
    NAMES.forEach((name) => { form.elements[name].value = ""; });
    if (!dialog.open) dialog.showModal();
    load();
  }

  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    if (!loaded) return;
    const changed = {};
    NAMES.forEach((name) => {
      const value = form.elements[name].value.trim();
      if (value !== "" && value !== loaded[name]) changed[name] = value;
    });
    if (!Object.keys(changed).length) { say("Nothing changed."); return; }
    const button = $("settingsSave");
    button.disabled = true;
    app.rpc.call("aria2.changeGlobalOption", changed).then(() => {
      say("Saved, also for the daemon's next start: " + Object.keys(changed).map(Fmt.optionLabel).join(", ") + ".", "ok");
      app.refreshNow();
      return load();
    }, (e) => say("Not saved: " + e.message, "err"))
      .then(() => { button.disabled = false; });
  });

  dialog.addEventListener("click", (ev) => {
    if (ev.target === dialog || ev.target.closest("[data-close]")) dialog.close();
  });

  return { open };
}
