// agentlog dashboard: follow the live stream and swap in the page's <main> when something changed.
// No inline script anywhere (the Content-Security-Policy forbids it); stored text is only ever
// set through the server's escaped HTML.
(function () {
  "use strict";
  document.documentElement.className += " js";  // shows the copy buttons (hidden without JavaScript)
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
          if (cursor >= 0) { mark(false); }
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

  // Copy buttons: the whole id is in the button's data-copy (and the id's own text and title).
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () { legacyCopy(text); });
    }
    legacyCopy(text);
    return Promise.resolve();
  }
  function legacyCopy(text) {
    var t = document.createElement("textarea");
    t.value = text;
    t.setAttribute("readonly", "");
    t.className = "offscreen";
    document.body.appendChild(t);
    t.select();
    try { document.execCommand("copy"); } catch (x) { /* nothing more to try */ }
    document.body.removeChild(t);
  }
  document.addEventListener("click", function (e) {
    var b = e.target && e.target.closest ? e.target.closest("button.copy") : null;
    if (!b) { return; }
    e.preventDefault();
    var text = b.getAttribute("data-copy") || "";
    copyText(text).then(function () {
      b.classList.add("done");
      b.textContent = "copied";
      document.body.setAttribute("data-copied", text);
      setTimeout(function () { b.classList.remove("done"); b.textContent = "copy"; }, 1500);
    });
  });

  // Keyboard: "/" focuses the page's search or filter box (or opens Search); j and k move a
  // cursor through the rows of the page's lists, focusing each row's first link (Enter opens it).
  var cursor = -1;
  function rows() {
    var marked = document.querySelectorAll("#main [data-row]");
    return marked.length ? marked : document.querySelectorAll("#main tbody tr, #main article.session, #main article.proposal");
  }
  function mark(focus) {
    var all = rows();
    Array.prototype.forEach.call(document.querySelectorAll("#main .cursor"), function (r) { r.classList.remove("cursor"); });
    if (!all.length) { cursor = -1; return; }
    cursor = Math.max(0, Math.min(cursor, all.length - 1));
    var row = all[cursor];
    row.classList.add("cursor");
    if (focus) {
      var link = row.querySelector("a[href]");
      if (link) { link.focus({ preventScroll: true }); }
      row.scrollIntoView({ block: "nearest" });
    }
  }
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) { return; }
    var t = e.target;
    if (t && (/INPUT|TEXTAREA|SELECT/.test(t.tagName) || t.isContentEditable)) {
      if (e.key === "Escape") { t.blur(); }
      return;
    }
    if (e.key === "/") {
      e.preventDefault();
      var box = document.querySelector("#main input[name=q], #main input[name=project], #main textarea[name=q]");
      if (box) { box.focus(); box.select(); } else { window.location.href = "/search"; }
    } else if (e.key === "j" || e.key === "k") {
      e.preventDefault();
      cursor = cursor < 0 ? 0 : cursor + (e.key === "j" ? 1 : -1);
      mark(true);
    }
  });

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
