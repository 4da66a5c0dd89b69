/* The report page: the marked document is fetched after the first screen; summary cards and
 * chips filter the problems, the search box narrows them, Previous/Next step through them and
 * scroll the document to each; a citation mark (clicked, tapped, or focused with Tab) shows its
 * reason in a side card. Plain JavaScript, no build step; without it the page still lists
 * every problem (first ones shown) and links the document. */
(function () {
  "use strict";

  var doc = document.getElementById("doc");
  var card = document.getElementById("reason-card");
  var tools = document.getElementById("problem-tools");
  var search = document.getElementById("problem-search");
  var position = document.getElementById("problem-position");
  var noMatch = document.getElementById("no-match");
  var printButton = document.getElementById("print-report");
  var items = Array.prototype.slice.call(document.querySelectorAll("#problems li.problem"));
  var groups = Array.prototype.slice.call(document.querySelectorAll("#problems section.group"));
  var state = { filter: "all", query: "", revealed: {}, current: -1 };
  var lastMark = null;

  /* --- the document ------------------------------------------------------------------- */
  var loaded = doc && doc.dataset.loaded ? Promise.resolve() : null;

  function loadDocument() {
    if (loaded) { return loaded; }
    if (!doc) { loaded = Promise.resolve(); return loaded; }
    doc.setAttribute("aria-busy", "true");
    loaded = fetch(doc.dataset.src, { credentials: "same-origin" })
      .then(function (resp) {
        if (!resp.ok) { throw new Error("HTTP " + resp.status); }
        return resp.text();
      })
      .then(function (html) {
        // Sanitised on the server (nh3) when extracted, marked by the server: plain tags only.
        doc.innerHTML = html;
        doc.dataset.loaded = "1";
        doc.removeAttribute("aria-busy");
      })
      .catch(function (err) {
        doc.removeAttribute("aria-busy");
        doc.innerHTML = "";
        var p = document.createElement("p");
        p.className = "error";
        p.textContent = "The document could not be loaded (" + err.message + "). ";
        var a = document.createElement("a");
        a.href = "?document=inline";
        a.textContent = "Open the report with the document";
        p.appendChild(a);
        doc.appendChild(p);
        loaded = null;
      });
    return loaded;
  }

  function markOf(index) {
    return doc ? doc.querySelector('mark[data-index="' + index + '"][tabindex]') ||
      doc.querySelector('mark[data-index="' + index + '"]') : null;
  }

  /* --- the side card ------------------------------------------------------------------ */
  function showReason(mark) {
    if (!card || !mark) { return; }
    var first = mark.hasAttribute("tabindex") ? mark : markOf(mark.dataset.index) || mark;
    var verdict = first.dataset.verdict || "";
    card.className = "reason-card k-" + verdict;
    card.querySelector(".reason-title").textContent = first.dataset.label || verdict;
    var text = Array.prototype.map.call(
      doc.querySelectorAll('mark[data-index="' + first.dataset.index + '"]'),
      function (m) { return m.textContent; }
    ).join("");
    card.querySelector(".reason-cite").textContent = text;
    card.querySelector(".reason-text").textContent = first.dataset.reason || "";
    card.hidden = false;
    // A screen reader reads the reason with the focused citation, not only its verdict.
    first.setAttribute("aria-describedby", "legend-" + verdict + " reason-card-text");
    lastMark = first;
  }

  function hideReason(returnFocus) {
    if (!card || card.hidden) { return; }
    card.hidden = true;
    if (returnFocus && lastMark) { lastMark.focus(); }
  }

  if (doc) {
    doc.addEventListener("click", function (event) {
      var mark = event.target.closest("mark.cite");
      if (mark) { showReason(mark); }
    });
    doc.addEventListener("focusin", function (event) {
      var mark = event.target.closest("mark.cite");
      if (mark) { showReason(mark); }
    });
    doc.addEventListener("keydown", function (event) {
      var mark = event.target.closest("mark.cite");
      if (mark && (event.key === "Enter" || event.key === " ")) {
        event.preventDefault();
        showReason(mark);
      }
    });
  }
  if (card) {
    document.getElementById("reason-close").addEventListener("click", function () { hideReason(true); });
  }
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") { hideReason(true); }
  });

  /* --- filter, search, reveal --------------------------------------------------------- */
  function matches(item) {
    if (state.filter !== "all" && item.dataset.kind !== state.filter) { return false; }
    if (state.query && item.textContent.toLowerCase().indexOf(state.query) < 0) { return false; }
    return true;
  }

  function visible(item) {
    // Beyond the first few of a group, an item shows once its group is revealed or a
    // search or filter picks it.
    var narrowed = state.query || state.filter !== "all";
    return matches(item) && (!item.dataset.more || narrowed || state.revealed[item.dataset.kind]);
  }

  function apply() {
    var shown = 0;
    items.forEach(function (item) {
      var on = visible(item);
      item.hidden = !on;
      if (on) { shown += 1; }
    });
    groups.forEach(function (group) {
      var kind = group.dataset.kind;
      var any = items.some(function (item) { return item.dataset.kind === kind && matches(item); });
      group.hidden = !any;
      var more = group.querySelector(".show-more");
      if (more) {
        more.hidden = !!(state.revealed[kind] || state.query || state.filter !== "all");
      }
    });
    if (noMatch) { noMatch.hidden = shown > 0; }
    document.querySelectorAll("[data-filter]").forEach(function (button) {
      button.setAttribute("aria-pressed", String(button.dataset.filter === state.filter));
    });
    state.current = -1;
    items.forEach(function (item) { item.classList.remove("current"); });
    if (position) { position.textContent = shown + " shown"; }
  }

  function setFilter(kind, scroll) {
    state.filter = kind;
    apply();
    if (scroll) { document.getElementById("problems").scrollIntoView({ block: "start" }); }
  }

  document.querySelectorAll("[data-filter]").forEach(function (button) {
    button.addEventListener("click", function () {
      setFilter(button.dataset.filter, button.classList.contains("stat"));
    });
  });
  document.querySelectorAll(".show-more").forEach(function (button) {
    button.addEventListener("click", function () {
      state.revealed[button.dataset.kind] = true;
      apply();
    });
  });
  if (search) {
    search.addEventListener("input", function () {
      state.query = search.value.trim().toLowerCase();
      apply();
    });
  }

  /* --- previous / next ---------------------------------------------------------------- */
  function go(item) {
    items.forEach(function (other) { other.classList.remove("current"); });
    item.hidden = false;
    item.classList.add("current");
    var list = items.filter(matches);
    if (position) { position.textContent = (list.indexOf(item) + 1) + " of " + list.length; }
    if (item.dataset.cite !== undefined) {
      loadDocument().then(function () {
        var mark = markOf(item.dataset.cite);
        if (!mark) { item.scrollIntoView({ block: "center" }); return; }
        mark.scrollIntoView({ block: "center" });
        mark.focus({ preventScroll: true });
        showReason(mark);
        mark.classList.add("flash");
        setTimeout(function () { mark.classList.remove("flash"); }, 1600);
      });
    } else {
      var ref = document.getElementById("ref-" + item.dataset.ref);
      if (ref) { ref.scrollIntoView({ block: "center" }); }
    }
  }

  function step(delta) {
    var list = items.filter(matches);
    if (!list.length) { return; }
    var at = list.indexOf(items[state.current]);
    at = at < 0 ? (delta > 0 ? 0 : list.length - 1) : (at + delta + list.length) % list.length;
    state.current = items.indexOf(list[at]);
    go(list[at]);
  }

  var next = document.getElementById("next-problem");
  var prev = document.getElementById("prev-problem");
  if (next) { next.addEventListener("click", function () { step(1); }); }
  if (prev) { prev.addEventListener("click", function () { step(-1); }); }

  document.addEventListener("click", function (event) {
    var link = event.target.closest("#problems a.go[data-cite]");
    if (!link) { return; }
    event.preventDefault();
    var item = link.closest("li.problem");
    state.current = items.indexOf(item);
    go(item);
  });

  /* --- start ------------------------------------------------------------------------- */
  if (tools) { tools.hidden = false; }
  document.querySelectorAll(".show-more").forEach(function (b) { b.hidden = false; });
  if (printButton) {
    printButton.hidden = false;
    printButton.addEventListener("click", function () {
      loadDocument().then(function () { window.print(); });
    });
  }
  // Printing is the whole report: folded lists print unfolded (CSS does it where the browser
  // knows ::details-content; this does it elsewhere).
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
    items.forEach(function (item) { item.hidden = false; });
    groups.forEach(function (group) { group.hidden = false; });
  });
  window.addEventListener("afterprint", apply);
  // The first screen is drawn; now the document (the long part) arrives.
  if (doc) {
    if (window.requestIdleCallback) { window.requestIdleCallback(loadDocument, { timeout: 300 }); }
    else { setTimeout(loadDocument, 0); }
  }
})();
