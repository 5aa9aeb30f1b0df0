// agentlog dashboard, the conversation view: "show all" swaps in the whole of a cut item,
// fetched from its own page (which the link opens without script): a tool call's input,
// output and diffs (the call's page, its call body), or a prompt's or a message's text (the
// text's page, its bubble). The fetched HTML is the server's escaped page; only that part
// of it is moved in.
(function () {
  "use strict";
  document.addEventListener("click", function (e) {
    var a = e.target && e.target.closest ? e.target.closest("a.show-all") : null;
    if (!a || !window.fetch || !window.DOMParser) { return; }
    var li = a.closest("li.call, li.prompt, li.message");
    var isCall = li ? li.classList.contains("call") : false;
    var part = li ? li.querySelector(isCall ? ".call-body" : ".bubble") : null;
    if (!part) { return; }
    var href = a.getAttribute("href");
    e.preventDefault();
    a.textContent = "loading…";
    fetch(href, { credentials: "same-origin", headers: { "X-Requested-With": "agentlog-call" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { window.location.href = href; return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var whole = doc.querySelector(isCall ? "#call-whole .call-body" : "#text-whole .bubble");
        if (!whole) { window.location.href = href; return; }
        if (part.id) { whole.id = part.id; }
        part.replaceWith(document.importNode(whole, true));
        li.setAttribute("data-whole", "1");
      })
      .catch(function () { window.location.href = href; });
  });
})();
