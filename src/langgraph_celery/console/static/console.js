// langgraph-celery console: live updates, the JSON editor, the diagrams' least size. No inline
// script runs in the pages (the Content-Security-Policy forbids it); every text from the server
// is set with textContent, never parsed as HTML.
"use strict";

(function () {
  var dirty = false;

  function markDirty() { dirty = true; }

  function showStale() {
    var stale = document.querySelector("[data-stale]");
    if (stale) { stale.hidden = false; }
  }

  // A notice (the outcome of the last action) stays through the live reloads that follow it.
  var NOTICE_KEY = "lgc-console-notice";

  function keepNotice() {
    var notice = document.querySelector("[data-notice]");
    if (notice && window.sessionStorage) {
      window.sessionStorage.setItem(NOTICE_KEY, JSON.stringify({
        path: window.location.pathname + window.location.search,
        error: notice.classList.contains("error"),
        text: notice.textContent
      }));
    }
  }

  function restoreNotice() {
    if (!window.sessionStorage) { return; }
    var kept = window.sessionStorage.getItem(NOTICE_KEY);
    window.sessionStorage.removeItem(NOTICE_KEY);
    if (!kept || document.querySelector("[data-notice]")) { return; }
    var notice = JSON.parse(kept);
    if (notice.path !== window.location.pathname + window.location.search) { return; }
    var element = document.createElement("p");
    element.className = "notice " + (notice.error ? "error" : "ok");
    element.setAttribute("role", "status");
    element.setAttribute("data-notice", "");
    element.textContent = notice.text;
    var main = document.querySelector("main");
    main.insertBefore(element, main.firstChild);
  }

  restoreNotice();

  // A form the server sent back with errors: this page answers a POST, so a live change must
  // not reload it (that would send the form again); the errors are brought into view.
  var formError = document.querySelector("[data-form-error]");
  if (formError) {
    markDirty();
    var reload = document.querySelector("[data-stale] a");
    if (reload) { reload.setAttribute("href", "/inbox"); }
    var card = formError.closest("article") || formError;
    card.scrollIntoView({ block: "start" });
    var invalid = card.querySelector(".field.invalid input, .field.invalid select, .field.invalid textarea, textarea[data-json-editor]");
    if (invalid) { invalid.focus({ preventScroll: true }); }
  }

  function reloadOrFlag() {
    if (dirty || document.activeElement && /^(TEXTAREA|INPUT|SELECT)$/.test(document.activeElement.tagName)) {
      showStale();
    } else {
      keepNotice();
      window.location.reload();
    }
  }

  function listen(url, name, handler) {
    if (!window.EventSource) { return null; }
    var source = new EventSource(url);
    var indicator = document.querySelector("[data-live-indicator]");
    source.addEventListener("open", function () { if (indicator) { indicator.classList.add("on"); } });
    source.addEventListener("error", function () { if (indicator) { indicator.classList.remove("on"); } });
    source.addEventListener(name, function (event) { handler(JSON.parse(event.data)); });
    return source;
  }

  // -- the JSON editor ------------------------------------------------------------------------
  function checkJson(textarea) {
    var status = textarea.parentNode.querySelector("[data-json-status]");
    var text = textarea.value.trim();
    var problem = "";
    if (text !== "") {
      try {
        var value = JSON.parse(text);
        if (!textarea.hasAttribute("data-any-json") && (value === null || typeof value !== "object" || Array.isArray(value))) {
          problem = "must be a JSON object: {\"key\": value, ...}";
        }
      } catch (error) {
        problem = "not valid JSON: " + error.message;
      }
    }
    textarea.setAttribute("aria-invalid", problem ? "true" : "false");
    if (status) {
      status.textContent = problem || (text === "" ? "empty: resumes without an update" : "valid JSON object");
      status.classList.toggle("bad", Boolean(problem));
    }
    return !problem;
  }

  document.querySelectorAll("textarea[data-json-editor]").forEach(function (textarea) {
    checkJson(textarea);
    // (Tab is left to the browser: it moves on to the next control, never traps the keyboard)
    textarea.addEventListener("input", function () { markDirty(); checkJson(textarea); });
  });

  document.querySelectorAll("form[data-watch-dirty] input, form[data-watch-dirty] select").forEach(function (input) {
    input.addEventListener("change", markDirty);
  });

  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) { event.preventDefault(); }
    });
  });

  // -- live runs table ------------------------------------------------------------------------
  var ago = function (iso) {
    var seconds = (Date.now() - Date.parse(iso)) / 1000;
    var future = seconds < 0;
    seconds = Math.abs(seconds);
    var text = seconds >= 86400 ? Math.round(seconds / 86400) + " d"
      : seconds >= 3600 ? Math.round(seconds / 3600) + " h"
      : seconds >= 60 ? Math.round(seconds / 60) + " min" : Math.round(seconds) + " s";
    return future ? "in " + text : text + " ago";
  };

  function cell(row, child) {
    var td = document.createElement("td");
    if (child) { td.appendChild(child); }
    row.appendChild(td);
    return td;
  }

  function element(tag, text, attributes) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) { node.textContent = text; }
    Object.keys(attributes || {}).forEach(function (key) { node.setAttribute(key, attributes[key]); });
    return node;
  }

  function timeElement(iso) {
    return element("time", ago(iso), { datetime: iso, title: iso });
  }

  var graphLabels = {};
  document.querySelectorAll("select[name=graph] option").forEach(function (option) {
    graphLabels[option.value] = option.textContent;
  });

  function renderRuns(table, page) {
    var body = table.tBodies[0];
    var before = {};
    Array.prototype.forEach.call(body.rows, function (row) { before[row.getAttribute("data-run")] = row.getAttribute("data-status"); });
    body.textContent = "";
    page.runs.forEach(function (run) {
      var row = element("tr", null, { "data-run": run.run_id, "data-status": run.status });
      cell(row, element("span", run.status, { "class": "badge status-" + run.status }));
      cell(row, document.createTextNode(graphLabels[run.graph_id] || run.graph_id));
      cell(row, element("a", run.thread_id, { href: "/threads/" + encodeURIComponent(run.thread_id) + "?graph=" + encodeURIComponent(run.graph_id) }));
      var link = element("a", null, { href: "/runs/" + encodeURIComponent(run.run_id) });
      link.appendChild(element("code", run.run_id.slice(0, 12)));
      cell(row, link);
      cell(row, run.node ? element("code", run.node, { "class": "node" }) : null);
      cell(row, timeElement(run.created_at));
      cell(row, timeElement(run.updated_at));
      if (before[run.run_id] !== run.status) { row.classList.add("flash"); }
      body.appendChild(row);
    });
    var empty = document.querySelector("[data-empty]");
    if (empty) { empty.hidden = page.runs.length > 0; }
    // The next page starts after the last run shown now, not after the one first shown.
    var older = document.querySelector("[data-older]");
    if (older) {
      var url = new URL(older.getAttribute("href"), window.location.href);
      url.searchParams.set("before", page.next_before || "");
      older.setAttribute("href", url.pathname + url.search);
      older.hidden = !page.next_before;
      older.parentNode.hidden = !page.next_before;
    }
  }

  // -- diagrams: shrunk to fit their box, but not past reading (then the box scrolls sideways,
  // to show the current node, or START) ------------------------------------------------------
  var MIN_DIAGRAM_SCALE = 0.7;
  document.querySelectorAll(".diagram:not(.small) > svg.graph").forEach(function (svg) {
    var width = svg.width.baseVal.value;
    if (width > 0) { svg.style.minWidth = width * MIN_DIAGRAM_SCALE + "px"; }
    var box = svg.parentElement;
    var focus = svg.querySelector(".current") || svg.querySelector("g.node.terminal");
    if (focus && box.scrollWidth > box.clientWidth) {
      var outer = box.getBoundingClientRect(), inner = focus.getBoundingClientRect();
      box.scrollLeft += inner.left + inner.width / 2 - (outer.left + outer.width / 2);
    }
  });

  var table = document.querySelector("[data-live-runs]");
  if (table && !table.hasAttribute("data-paged")) {
    listen(table.getAttribute("data-events"), "runs", function (page) { renderRuns(table, page); });
  }

  // -- live inbox and thread ------------------------------------------------------------------
  var inbox = document.querySelector("[data-live-inbox]");
  if (inbox) {
    var shown = inbox.getAttribute("data-runs").trim().split(/\s+/).filter(Boolean).sort().join(" ");
    listen(inbox.getAttribute("data-events"), "runs", function (page) {
      var now = page.runs.map(function (run) { return run.run_id; }).sort().join(" ");
      if (now !== shown) { shown = now; reloadOrFlag(); }
    });
  }

  var thread = document.querySelector("[data-live-thread]");
  if (thread) {
    var seen = JSON.stringify(JSON.parse(thread.getAttribute("data-fingerprint")));
    listen(thread.getAttribute("data-events"), "thread", function (data) {
      var now = JSON.stringify(data.fingerprint);
      if (now !== seen) { seen = now; reloadOrFlag(); }
    });
  }
})();
