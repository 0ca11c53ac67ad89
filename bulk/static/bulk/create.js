/* Missive's campaign creation form (Django admin, bulk/admin_forms.py).
 *
 * - Shows only the audience fields of the chosen kind (the rows whose input says
 *   data-audience="<kind>"); without this script every field shows, which works too.
 * - After a preview, brings its figures (#dry-run) into view.
 * - Keeps the message preview (#text-preview) and its character count (#text-count) current as
 *   the operator types. The text is set with textContent: it is never read as HTML.
 * - A form already submitted is not submitted again by a second click while the page loads
 *   (the server's idempotency key makes a double launch create one campaign anyway).
 */
(function () {
  "use strict";

  function showAudience(select) {
    document.querySelectorAll("[data-audience]").forEach(function (input) {
      var row = input.closest(".form-row");
      if (row) { row.hidden = input.getAttribute("data-audience") !== select.value; }
    });
  }

  function previewText(textarea) {
    var preview = document.getElementById("text-preview");
    var count = document.getElementById("text-count");
    if (!preview) { return; }
    preview.textContent = textarea.value;
    preview.classList.toggle("empty", !textarea.value);
    if (count) {
      var max = Number(count.getAttribute("data-max"));
      var length = Array.from(textarea.value).length;  // code points, as the server counts
      count.textContent = length.toLocaleString("en-US") + " / " + max.toLocaleString("en-US") +
        " characters";
      count.classList.toggle("too-long", length > max);
    }
  }

  function onceOnly(form) {
    form.addEventListener("submit", function (event) {
      if (form.getAttribute("data-submitted")) { event.preventDefault(); return; }
      form.setAttribute("data-submitted", "1");
    });
    window.addEventListener("pageshow", function () { form.removeAttribute("data-submitted"); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var select = document.getElementById("id_audience_type");
    var textarea = document.getElementById("id_text");
    var form = document.getElementById("campaign_form");
    if (select) {
      showAudience(select);
      select.addEventListener("change", function () { showAudience(select); });
    }
    if (textarea) {
      previewText(textarea);
      textarea.addEventListener("input", function () { previewText(textarea); });
    }
    if (form) { onceOnly(form); }
    var figures = document.getElementById("dry-run");
    if (figures) { figures.scrollIntoView({ block: "center" }); }
  });
})();
