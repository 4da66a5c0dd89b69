/* The job page: poll the job's progress with exponential backoff (capped), draw the bar, and on a
 * terminal status save the run (POST /api/analysis-runs, the client writer) and open the report.
 * Plain JavaScript, no build step. */
(function () {
  "use strict";

  var INITIAL_DELAY_MS = 500;
  // The cap: at most every second during the first minute (most analyses end within it, and the
  // report should open soon after they do), then every 5 s for a long one. Once the text is
  // extracted (the longest step), the rest of a 300-page thesis (finding the citations,
  // checking them, writing the report) takes about a second: poll every 250 ms from then
  // on, so the report opens within a fraction of a second of the finish instead of up to a
  // whole interval later. A cheap request (one primary-key read), only for the last stages
  // of a job, and for at most NEAR_END_MS of them: a thesis whose checking waits for a
  // worker (a busy queue, a document near the limits) falls back to the ordinary cap.
  var EARLY_MAX_DELAY_MS = 1000;
  var EARLY_MS = 60000;
  var MAX_DELAY_MS = 5000;
  var NEAR_END_DELAY_MS = 250;
  var NEAR_END_MS = 20000;
  var startedAt = Date.now();
  var nearEndSince = null;  // when the last stages were first seen
  function cap() {
    if (nearEndSince !== null && Date.now() - nearEndSince < NEAR_END_MS) {
      return NEAR_END_DELAY_MS;
    }
    return Date.now() - startedAt < EARLY_MS ? EARLY_MAX_DELAY_MS : MAX_DELAY_MS;
  }
  function isNearEnd(job) {
    var step = job.progress.step;
    return step === "parse" || step === "verify" || step === "resolve" || step === "finalize";
  }
  var FACTOR = 1.6;
  var MAX_SAVE_ATTEMPTS = 5;

  var root = document.getElementById("job");
  if (!root) { return; }
  var fill = document.getElementById("progress-fill");
  var bar = document.getElementById("progress");
  var label = document.getElementById("progress-label");
  var errorBox = document.getElementById("job-error");
  var errorText = document.getElementById("job-error-text");
  var initial = JSON.parse(document.getElementById("job-initial").textContent);

  var STEP_LABELS = {
    queued: "Waiting for a worker…",
    extract: "Extracting the text…",
    parse: "Finding citations and references…",
    verify: "Checking citations",
    resolve: "Looking up the references…",
    finalize: "Writing the report…",
    complete: "Done: opening the report…",
    failed: "Failed"
  };
  // Where each step sits on the bar; verify fills its span by done/total.
  var STEP_SPAN = {
    queued: [0, 3], extract: [3, 10], parse: [10, 20], verify: [20, 88],
    resolve: [88, 93], finalize: [93, 98], complete: [100, 100], failed: [100, 100]
  };

  function percent(job) {
    var step = job.status === "complete" || job.status === "failed" ? job.status : job.progress.step;
    var span = STEP_SPAN[step] || [0, 3];
    var frac = job.progress.total > 0 ? Math.min(1, job.progress.done / job.progress.total) : 0;
    return Math.round(span[0] + (span[1] - span[0]) * frac);
  }

  function draw(job) {
    var pct = percent(job);
    fill.style.width = pct + "%";
    bar.setAttribute("aria-valuenow", String(pct));
    bar.dataset.status = job.status;
    var step = job.status === "complete" || job.status === "failed" ? job.status : job.progress.step;
    var text = STEP_LABELS[step] || "Working…";
    if (step === "verify" && job.progress.total > 0) {
      text += " " + job.progress.done + " / " + job.progress.total;
    }
    label.textContent = text;
    if (job.status === "failed") {
      errorText.textContent = job.error || "The analysis failed.";
      errorBox.hidden = false;
      label.hidden = true;
    }
  }

  function isTerminal(job) { return job.status === "complete" || job.status === "failed"; }

  function save(job, attempt) {
    // The server builds the run from the job itself; we send only its id.
    return fetch(root.dataset.saveUrl, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": root.dataset.csrf },
      body: JSON.stringify({ job_id: job.id })
    }).then(function (resp) {
      if (resp.status === 200 || resp.status === 201) { return resp.json(); }
      if (resp.status >= 500 && attempt < MAX_SAVE_ATTEMPTS) {
        return wait(INITIAL_DELAY_MS * Math.pow(2, attempt)).then(function () { return save(job, attempt + 1); });
      }
      throw new Error("save failed with HTTP " + resp.status);
    }, function (err) {
      if (attempt < MAX_SAVE_ATTEMPTS) {
        return wait(INITIAL_DELAY_MS * Math.pow(2, attempt)).then(function () { return save(job, attempt + 1); });
      }
      throw err;
    });
  }

  function wait(ms) { return new Promise(function (resolve) { setTimeout(resolve, ms); }); }

  function finish(job) {
    draw(job);
    save(job, 0).then(function () {
      if (job.status === "complete") { window.location.assign(root.dataset.reportUrl); }
      root.dataset.saved = "1";
    }, function () {
      // The sweeper records the run later anyway; tell the user where it will appear.
      label.hidden = false;
      label.textContent = "Finished, but the report could not be saved from this tab: it will appear under My reports shortly.";
    });
  }

  var delay = INITIAL_DELAY_MS;

  function poll() {
    fetch(root.dataset.statusUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (resp) {
        if (resp.status === 401 || resp.status === 403 || resp.status === 404) {
          throw Object.assign(new Error("HTTP " + resp.status), { fatal: true });
        }
        if (!resp.ok) { throw new Error("HTTP " + resp.status); }
        return resp.json();
      })
      .then(function (job) {
        if (isTerminal(job)) { finish(job); return; }
        draw(job);
        if (nearEndSince === null && isNearEnd(job)) { nearEndSince = Date.now(); }
        // Exponential backoff up to the cap: a quick job is seen finishing at once, a long one
        // costs the server one request every few seconds.
        delay = Math.min(cap(), delay * FACTOR);
        setTimeout(poll, delay);
      })
      .catch(function (err) {
        if (err.fatal) {
          label.textContent = "This analysis cannot be shown (" + err.message + "). Try signing in again.";
          return;
        }
        delay = Math.min(cap(), delay * FACTOR);
        label.textContent = "Connection problem, retrying…";
        setTimeout(poll, delay);
      });
  }

  if (isTerminal(initial)) { finish(initial); } else { draw(initial); setTimeout(poll, INITIAL_DELAY_MS); }
})();
