// The operations dashboard's live refresh: every few seconds fetch the panels (an HTML
// fragment rendered by the server, the same template as the page) and swap them in, without
// reloading the page. Pausable; the interval and the pause are kept in localStorage. Ghost
// rows the operator ticked stay ticked across refreshes. No inline script: the page's
// Content-Security-Policy allows only scripts from this site.
(function () {
  "use strict";
  const live = document.getElementById("dash-live");
  const panels = document.getElementById("dash-panels");
  if (!live || !panels) return;
  const url = live.dataset.panelsUrl;
  const pause = document.getElementById("dash-pause");
  const select = document.getElementById("dash-interval");
  const status = document.getElementById("dash-status");
  const KEY = "acurio.dashboard.";
  let timer = null;
  let busy = false;
  let paused = localStorage.getItem(KEY + "paused") === "1";
  const stored = localStorage.getItem(KEY + "interval");
  if (stored && [...select.options].some((o) => o.value === stored)) select.value = stored;

  function seconds() { return Number(select.value) || 5; }

  function show(state, text) {
    live.dataset.state = state;
    status.textContent = text;
  }

  function schedule() {
    clearTimeout(timer);
    timer = null;
    if (!paused) timer = setTimeout(refresh, seconds() * 1000);
  }

  function ticked() {
    return new Set([...panels.querySelectorAll("input[name=job_ids]:checked")].map((e) => e.value));
  }

  async function refresh() {
    if (busy || paused) return;
    if (document.hidden) { schedule(); return; }  // a background tab does not poll
    busy = true;
    try {
      const response = await fetch(url, { credentials: "same-origin", cache: "no-store",
                                          headers: { "X-Requested-With": "fetch" } });
      if (response.redirected) throw new Error("signed out: reload the page to sign in");
      if (!response.ok) throw new Error("HTTP " + response.status);
      const html = await response.text();
      if (paused) return;  // paused while the request was in flight: keep what is shown
      const keep = ticked();
      panels.innerHTML = html;
      for (const box of panels.querySelectorAll("input[name=job_ids]")) {
        if (keep.has(box.value)) box.checked = true;
      }
      show("live", "Live · updated " + new Date().toLocaleTimeString());
    } catch (error) {
      show("error", "Refresh failed (" + error.message + "); trying again");
    } finally {
      busy = false;
      schedule();
    }
  }

  function setPaused(value, { now = true } = {}) {
    paused = value;
    localStorage.setItem(KEY + "paused", value ? "1" : "0");
    pause.textContent = value ? "Resume" : "Pause";
    pause.setAttribute("aria-pressed", value ? "true" : "false");
    if (value) {
      clearTimeout(timer);
      show("paused", "Paused");
    } else {
      show("live", "Live every " + seconds() + " s");
      if (now) refresh(); else schedule();
    }
  }

  pause.addEventListener("click", () => setPaused(!paused));
  select.addEventListener("change", () => {
    localStorage.setItem(KEY + "interval", select.value);
    if (!paused) { show("live", "Live every " + seconds() + " s"); schedule(); }
  });
  document.addEventListener("visibilitychange", () => { if (!document.hidden && !paused) refresh(); });
  setPaused(paused, { now: false });  // the page was just rendered: the first fetch waits
})();
