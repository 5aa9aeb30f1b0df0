// agentlog dashboard: follow the live stream and swap in the page's <main> when something changed.
// No inline script anywhere (the Content-Security-Policy forbids it); stored text is only ever
// set through the server's escaped HTML.
(function () {
  "use strict";
  var dot = document.getElementById("live");
  var pending = false;
  var last = document.body.getAttribute("data-live-id") || "0";

  function refresh() {
    if (pending) { return; }
    pending = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Requested-With": "agentlog-live" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        pending = false;
        if (html === null) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("main");
        var main = document.getElementById("main");
        var active = document.activeElement;
        if (fresh && main && !(active && main.contains(active) && /INPUT|TEXTAREA|SELECT/.test(active.tagName))) {
          main.replaceWith(fresh);
          document.body.setAttribute("data-refreshed", String(Date.now()));
        }
      })
      .catch(function () { pending = false; });
  }

  // Search as you type: the form's fields refetch the page and swap in its results only
  // (the input keeps its focus and caret).
  var form = document.getElementById("search-form");
  if (form && window.fetch && window.URLSearchParams) {
    var timer = null;
    var asked = 0;
    var run = function () {
      var url = "/search?" + new URLSearchParams(new FormData(form)).toString();
      var n = ++asked;
      fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "agentlog-search" } })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (html === null || n !== asked) { return; }
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.getElementById("results");
          var results = document.getElementById("results");
          if (fresh && results) {
            results.replaceWith(fresh);
            window.history.replaceState(null, "", url);
          }
        })
        .catch(function () {});
    };
    Array.prototype.forEach.call(form.querySelectorAll("[data-live-search]"), function (el) {
      el.addEventListener(el.tagName === "SELECT" ? "change" : "input", function () {
        if (timer) { clearTimeout(timer); }
        timer = setTimeout(run, 250);
      });
    });
  }

  if (window.EventSource) {
    var source = new EventSource("/api/stream?last=" + encodeURIComponent(last));
    var onChange = function (e) {
      if (e.lastEventId) { last = e.lastEventId; }
      refresh();
    };
    ["events", "store", "memory"].forEach(function (t) { source.addEventListener(t, onChange); });
    source.addEventListener("resync", refresh);
    source.onopen = function () { if (dot) { dot.className = "live on"; } };
    source.onerror = function () { if (dot) { dot.className = "live off"; } };
  }
})();
