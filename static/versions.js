// Version picker: type-to-filter over the grouped <select> (progressive enhancement: without
// JS the select and its Go button work alone). Enter in the filter switches to the first
// version left. No inline scripts (CSP).
(function () {
  "use strict";

  function setup() {
    var select = document.getElementById("switch-version");
    if (!select || !select.form) return;
    var filter = document.createElement("input");
    filter.type = "search";
    filter.id = "version-filter";
    filter.className = "vfilter";
    filter.placeholder = "filter";
    filter.autocomplete = "off";
    filter.setAttribute("aria-label", "Filter versions");
    filter.setAttribute("aria-controls", "switch-version");
    select.parentNode.insertBefore(filter, select);

    function visible() {
      return Array.prototype.filter.call(select.options, function (o) { return !o.hidden; });
    }

    filter.addEventListener("input", function () {
      var q = filter.value.trim().toLowerCase();
      Array.prototype.forEach.call(select.options, function (o) {
        o.hidden = q !== "" && o.value.toLowerCase().indexOf(q) < 0;
      });
      Array.prototype.forEach.call(select.querySelectorAll("optgroup"), function (g) {
        g.hidden = !Array.prototype.some.call(g.children, function (o) { return !o.hidden; });
      });
    });

    filter.addEventListener("keydown", function (event) {
      if (event.key !== "Enter") return;
      event.preventDefault();
      var left = visible();
      if (!left.length) return;
      select.value = left[0].value;
      select.form.submit();
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();
