// Header search box: "/" focuses it, htmx shows results as you type (attributes in
// base.html), Enter opens the top hit (or the option chosen with the arrow keys), Escape closes the list.
// ARIA combobox: the box keeps focus; aria-activedescendant names the active option. No inline scripts (CSP).
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
    sync();
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

  function options() {
    var p = panel();
    return p ? Array.prototype.slice.call(p.querySelectorAll("[role=option]")) : [];
  }

  // Combobox state: expanded while the listbox is shown; the active option is announced
  // through aria-activedescendant while focus stays in the box.
  function sync() {
    var input = box();
    if (!input) return;
    // A new list: nothing is active yet.
    input.setAttribute("aria-expanded", options().length > 0 ? "true" : "false");
    input.removeAttribute("aria-activedescendant");
  }

  function activate(input, opt) {
    options().forEach(function (o) {
      o.setAttribute("aria-selected", o === opt ? "true" : "false");
      o.classList.toggle("active", o === opt);
    });
    if (opt) {
      input.setAttribute("aria-activedescendant", opt.id);
      opt.scrollIntoView({ block: "nearest" });
    } else {
      input.removeAttribute("aria-activedescendant");
    }
  }

  function active(input) {
    var id = input.getAttribute("aria-activedescendant");
    return id ? document.getElementById(id) : null;
  }

  document.addEventListener("htmx:afterSwap", sync);

  document.addEventListener("keydown", function (event) {
    var input = box();
    if (!input) return;
    if (event.key === "/" && !typing(document.activeElement) && !event.ctrlKey && !event.metaKey && !event.altKey) {
      event.preventDefault();
      input.focus();
      input.select();
      return;
    }
    if (event.target !== input) return;
    var list = options();
    var at = list.indexOf(active(input));
    if (event.key === "Enter" && !event.isComposing) {
      event.preventDefault();
      if (at >= 0) window.location.href = list[at].href;
      else openTopHit(input);
    } else if (event.key === "Escape") {
      if (list.length) close(); else input.blur();
    } else if (event.key === "ArrowDown" && list.length) {
      event.preventDefault();
      activate(input, list[Math.min(at + 1, list.length - 1)]);
    } else if (event.key === "ArrowUp" && list.length) {
      event.preventDefault();
      activate(input, at > 0 ? list[at - 1] : null);
    }
  });

  // A click elsewhere closes the list.
  document.addEventListener("click", function (event) {
    var p = panel();
    if (p && !p.contains(event.target) && event.target !== box()) close();
  });
})();
