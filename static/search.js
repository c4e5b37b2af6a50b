// Header search box: "/" focuses it, htmx shows results as you type (attributes in
// base.html), Enter opens the top hit, Escape closes the list. No inline scripts (CSP).
(function () {
  "use strict";

  function box() { return document.getElementById("search"); }
  function panel() { return document.getElementById("search-results"); }

  function typing(el) {
    if (!el) return false;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }

  function close() {
    var p = panel();
    if (p) p.innerHTML = "";
  }

  // The top hit of the list on screen, if it answers what is typed now.
  function shownTopHit(q) {
    var hits = panel() && panel().querySelector(".search-hits");
    if (!hits || hits.getAttribute("data-q") !== q) return null;
    return hits.querySelector("a[data-top-hit]");
  }

  function openTopHit(input) {
    var q = input.value;
    if (!q.trim()) return;
    var link = shownTopHit(q);
    if (link) { window.location.href = link.href; return; }
    // Enter beat the debounce: ask the API, fall back to the results page.
    var form = input.form;
    var params = new URLSearchParams(new FormData(form));
    params.set("limit", "1");
    fetch("/api/search?" + params.toString(), { headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (data) {
        if (data && data.results && data.results.length) window.location.href = data.results[0].url;
        else form.submit();
      })
      .catch(function () { form.submit(); });
  }

  function links() {
    var p = panel();
    return p ? Array.prototype.slice.call(p.querySelectorAll("a.hit")) : [];
  }

  document.addEventListener("keydown", function (event) {
    var input = box();
    if (!input) return;
    if (event.key === "/" && !typing(document.activeElement) && !event.ctrlKey && !event.metaKey && !event.altKey) {
      event.preventDefault();
      input.focus();
      input.select();
      return;
    }
    if (event.target === input) {
      if (event.key === "Enter" && !event.isComposing) {
        event.preventDefault();
        openTopHit(input);
      } else if (event.key === "Escape") {
        close();
        input.blur();
      } else if (event.key === "ArrowDown") {
        var first = links()[0];
        if (first) { event.preventDefault(); first.focus(); }
      }
      return;
    }
    // Arrow keys walk the result list; Escape goes back to the box.
    var list = links();
    var at = list.indexOf(document.activeElement);
    if (at < 0) return;
    if (event.key === "ArrowDown" && at + 1 < list.length) { event.preventDefault(); list[at + 1].focus(); }
    else if (event.key === "ArrowUp") { event.preventDefault(); (at > 0 ? list[at - 1] : input).focus(); }
    else if (event.key === "Escape") { close(); input.focus(); }
  });

  // A click elsewhere closes the list.
  document.addEventListener("click", function (event) {
    var p = panel();
    if (p && !p.contains(event.target) && event.target !== box()) close();
  });
})();
