/* Missive's live campaign console (Django admin: the campaign list and page).
 *
 * Every PERIOD_MS it fetches progress.json for the campaigns on the page (bulk/admin_views.py) and
 * rewrites the elements marked data-live="<field>" data-live-id="<campaign id>" in place, with the
 * same text the server rendered (bulk/admin.py). It stops once every campaign shown has ended
 * (and any recall is complete), and waits while the tab is hidden. The campaign page's Cancel
 * and Recall buttons ask for a confirmation first (data-confirm).
 */
(function () {
  "use strict";
  var PERIOD_MS = 1500;
  var ENDED = { finished: true, cancelled: true, failed: true };

  function num(x) {
    return Number(x).toLocaleString("en-US");
  }

  // The audience is still being planned: its total grows; the percentage is of its estimated
  // size (b.estimate), or none before the first plan step has counted it.
  function planning(b) {
    return !b.planned && b.status !== "finished";
  }

  function pad(x) {
    return (x < 10 ? "0" : "") + x;
  }

  var TEXT = {
    status: function (b) {
      return b.status + (b.pause_reason ? " (" + b.pause_reason + ")" : "") +
        (b.recall ? " · message recalled" : "");
    },
    warning: function (b) {
      return b.no_worker ? "No worker consumes " + b.queue + " (" + num(b.queued || 0) + " tasks waiting)" : "";
    },
    figures: function (b) {
      var skipped = b.skipped.quota + b.skipped.blocked;
      var counts = num(b.delivered) + " delivered · " + num(skipped) + " skipped · " +
        num(b.failed) + " failed";
      if (planning(b) && b.estimate) {
        return b.percent + "% · " + counts + " of ~" + num(b.expected_total) +
          " (estimated; " + num(b.total) + " planned so far)";
      }
      if (planning(b)) { return counts + " of " + num(b.total) + " planned so far"; }
      return b.percent + "% · " + counts + " of " + num(b.total);
    },
    recall: function (b) {
      var r = b.recall;
      return r ? "Recalled · " + r.percent + "% (" + num(r.batches_done) + " / " + num(r.batches) + " batches)" : "";
    },
    rate: function (b) {
      if (!b.rate) { return "—"; }
      return b.rate.per_s.toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 }) +
        "/s over " + Math.round(b.rate.over_s) + " s";
    },
    eta: function (b) {
      if (b.eta_s === null) { return "—"; }
      var s = Math.round(b.eta_s), m = Math.floor(s / 60), h = Math.floor(m / 60);
      if (h) { return h + " h " + pad(m % 60) + " min"; }
      return m ? m + " min " + pad(s % 60) + " s" : s + " s";
    },
    totals: function (b) {
      return num(b.delivered) + " delivered, " + num(b.failed) + " failed; skipped " +
        num(b.skipped.quota) + " quota, " + num(b.skipped.blocked) + " blocked, " +
        num(b.skipped.invalid) + " invalid, " + num(b.skipped.duplicate) + " duplicate";
    }
  };
  TEXT.banner = TEXT.warning;

  function ids() {
    var seen = {};
    document.querySelectorAll("[data-live-id]").forEach(function (el) {
      seen[el.getAttribute("data-live-id")] = true;
    });
    return Object.keys(seen);
  }

  function endpoint(list) {
    var base = window.location.pathname.replace(/(\/bulk\/campaign\/).*$/, "$1");
    return base + "progress.json?ids=" + list.join(",");
  }

  function paint(body) {
    var selector = '[data-live-id="' + body.id + '"]';
    document.querySelectorAll(selector).forEach(function (el) {
      var field = el.getAttribute("data-live");
      if (field === "bar") {
        if (planning(body) && !body.estimate) { el.removeAttribute("value"); } else { el.value = body.percent; }
      } else if (TEXT[field]) {
        var text = TEXT[field](body);
        if (el.textContent !== text) { el.textContent = text; }
        if (field === "banner") { el.hidden = !text; }
      }
    });
  }

  function listBanner(bodies) {
    var main = document.querySelector("#changelist");
    if (!main) { return; }
    var banner = document.getElementById("live-list-banner");
    var idle = bodies.filter(function (b) { return b.no_worker; });
    if (!banner) {
      banner = document.createElement("p");
      banner.id = "live-list-banner";
      banner.className = "live-banner";
      main.parentNode.insertBefore(banner, main);
    }
    banner.hidden = !idle.length;
    banner.textContent = idle.length ? "No worker consumes the queue of running campaign(s) " +
      idle.map(function (b) { return b.id + " (" + b.queue + ")"; }).join(", ") +
      ": they make no progress until one starts." : "";
  }

  function active(body) {
    return !ENDED[body.status] || (body.recall !== null && body.recall.percent < 100);
  }

  function poll() {
    var list = ids();
    if (!list.length) { return; }
    if (document.hidden) { window.setTimeout(poll, PERIOD_MS); return; }
    fetch(endpoint(list), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("progress.json answered " + response.status); }
        return response.json();
      })
      .then(function (data) {
        data.campaigns.forEach(paint);
        listBanner(data.campaigns);
        if (data.campaigns.some(active)) { window.setTimeout(poll, PERIOD_MS); }
      })
      .catch(function () { window.setTimeout(poll, PERIOD_MS * 2); });
  }

  function confirmations() {
    document.querySelectorAll("form.console-action[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.getAttribute("data-confirm"))) { event.preventDefault(); }
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    confirmations();
    poll();
  });
})();
