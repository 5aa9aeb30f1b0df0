// agentlog dashboard, the conversation view: "show all" swaps in the whole input, output and
// diffs of one tool call, fetched from the call's own page (which the link opens without
// script). The fetched HTML is the server's escaped page; only its call body is moved in.
(function () {
  "use strict";
  document.addEventListener("click", function (e) {
    var a = e.target && e.target.closest ? e.target.closest("a.show-all") : null;
    if (!a || !window.fetch || !window.DOMParser) { return; }
    var li = a.closest("li.call");
    var body = li ? li.querySelector(".call-body") : null;
    if (!body) { return; }
    e.preventDefault();
    a.textContent = "loading…";
    fetch(a.getAttribute("href"), { credentials: "same-origin", headers: { "X-Requested-With": "agentlog-call" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { window.location.href = a.getAttribute("href"); return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var whole = doc.querySelector("#call-whole .call-body");
        if (!whole) { window.location.href = a.getAttribute("href"); return; }
        whole.id = body.id;
        body.replaceWith(document.importNode(whole, true));
        li.setAttribute("data-whole", "1");
      })
      .catch(function () { window.location.href = a.getAttribute("href"); });
  });
})();
