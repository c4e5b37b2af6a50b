// Flag Atlas: the little behaviour htmx does not cover. No inline scripts (CSP).
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  // Source view: highlight #L12 or #L12-L20 and scroll it into view.
  function highlightHash(scroll) {
    var match = /^#L(\d+)(?:-L?(\d+))?$/.exec(window.location.hash);
    document.querySelectorAll("tr.hl, li.hl").forEach(function (row) { row.classList.remove("hl"); });
    if (!match) return;
    var first = parseInt(match[1], 10);
    var last = match[2] ? parseInt(match[2], 10) : first;
    if (last < first) { var t = first; first = last; last = t; }
    var firstRow = null;
    for (var n = first; n <= last && n - first < 5000; n++) {
      var row = document.getElementById("L" + n);
      if (!row) break;
      row.classList.add("hl");
      if (!firstRow) firstRow = row;
    }
    if (firstRow && scroll !== false) firstRow.scrollIntoView({ block: last - first > 10 ? "start" : "center" });
  }

  // A click on a line number (drawn by CSS in the gutter of li#L12) links to that line;
  // shift-click extends the selection into a range. The page is not scrolled.
  function lineClick(event) {
    var line = event.target.closest && event.target.closest("ol.source > li[id^='L']");
    if (!line) return;
    var gutter = parseFloat(getComputedStyle(line, "::before").width) || 0;
    var left = line.parentElement.getBoundingClientRect().left;
    if (event.clientX - left > gutter) return;  // a click in the code itself
    event.preventDefault();
    var n = parseInt(line.id.slice(1), 10);
    var hash = "#L" + n;
    var match = /^#L(\d+)/.exec(window.location.hash);
    if (event.shiftKey && match) {
      var a = parseInt(match[1], 10);
      hash = "#L" + Math.min(a, n) + "-L" + Math.max(a, n);
    }
    history.replaceState(null, "", hash);
    highlightHash(false);
  }

  function copyText(text, button) {
    function done() {
      var label = button.textContent;
      button.classList.add("done");
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = label; button.classList.remove("done"); }, 1200);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text); done(); });
    } else {
      fallbackCopy(text);
      done();
    }
  }

  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
    document.body.removeChild(area);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy], button[data-copy-location]");
    if (button) {
      var text;
      if (button.hasAttribute("data-copy-location")) {
        text = window.location.href;
      } else {
        text = button.getAttribute("data-copy");
        if (button.hasAttribute("data-absolute")) text = window.location.origin + text;
        // Markdown to paste elsewhere: its site-relative links made absolute, and "<page>"
        // (a finding's permalink) is this page's address.
        if (button.hasAttribute("data-links")) {
          text = text.split("](/").join("](" + window.location.origin + "/")
                     .split("](<page>)").join("](" + window.location.href + ")");
        }
      }
      button.setAttribute("data-copied", text);
      copyText(text, button);
      return;
    }
    lineClick(event);
  });

  // The version switcher goes on an explicit choice only (WCAG 3.2.2 On Input): a pick with
  // the pointer, or Enter, or leaving the select after a change. Arrow keys on a closed
  // select change its value one step at a time, so a change made by keys only shows Go.
  var keyed = false;
  function switcher(event) {
    var select = event.target.closest && event.target.closest("select[data-autosubmit]");
    return select && select.form ? select : null;
  }
  function changed(select) {
    var picked = select.options[select.selectedIndex];
    return picked && !picked.defaultSelected;
  }
  document.addEventListener("pointerdown", function (event) { if (switcher(event)) keyed = false; });
  document.addEventListener("keydown", function (event) {
    var select = switcher(event);
    if (!select) return;
    if (event.key === "Enter") {
      event.preventDefault();
      if (changed(select)) select.form.submit();
    } else {
      keyed = true;
    }
  });
  document.addEventListener("change", function (event) {
    var select = switcher(event);
    if (!select) return;
    if (!keyed) select.form.submit();
    else select.form.classList.toggle("pending", changed(select));
  });
  document.addEventListener("focusout", function (event) {
    var select = switcher(event);
    if (select && keyed && changed(select)) select.form.submit();
  });

  // A list filter swapped in by htmx moves the URL but not the header: the switcher and the
  // old-version banner take the new query, so switching versions keeps the filter.
  document.addEventListener("htmx:pushedIntoHistory", function () {
    var query = window.location.search.slice(1);
    var input = document.querySelector("form.switcher input[name=query]");
    if (input) input.value = query;
    var link = document.querySelector("a.same-page");
    if (link) {
      var url = new URL(link.href);
      url.searchParams.set("query", query);
      link.href = url.pathname + url.search;
    }
  });

  // Folded long lists (templates/_fold.html): their filter boxes work with JavaScript only,
  // so they are shown here; typing hides the items whose text does not contain the words.
  function setUpFilters(root) {
    root.querySelectorAll("details.fold[data-items] > p.list-filter[hidden]").forEach(function (p) {
      p.hidden = false;
    });
  }
  document.addEventListener("input", function (event) {
    var box = event.target.closest && event.target.closest("p.list-filter input");
    if (!box) return;
    var fold = box.closest("details.fold");
    var words = box.value.trim().toLowerCase();
    var items = fold.querySelectorAll(fold.getAttribute("data-items"));
    var shown = 0;
    items.forEach(function (item) {
      var hit = !words || item.textContent.toLowerCase().indexOf(words) !== -1;
      item.hidden = !hit;
      if (hit) shown++;
      if (hit && words && item.tagName === "DETAILS") item.open = true;
    });
    fold.querySelector("p.list-filter output").textContent = words ? shown + " of " + items.length + " shown" : "";
  });
  setUpFilters(document);

  // A link to a constraint (#c-...) folded in a closed <details>: open the folds around it
  // and bring it into view.
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (!target) return;
    var opened = false;
    for (var el = target.parentElement; el; el = el.parentElement) {
      if (el.tagName === "DETAILS" && !el.open) { el.open = true; opened = true; }
    }
    if (opened) target.scrollIntoView({ block: "start" });
  }
  function onHash() { highlightHash(); openTarget(); }

  window.addEventListener("hashchange", onHash);
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", onHash);
  } else {
    onHash();
  }
})();
