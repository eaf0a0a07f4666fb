// Baton console: live pages. The page's body names an event stream (data-live). When the
// console says the page changed, the page is fetched again and each part that differs
// (elements with data-part and an id) is swapped in, except one the user is typing in: that
// one is marked stale and swapped once they leave it. Without this script every page still
// works; it just does not move on its own.
(function () {
  "use strict";
  var url = document.body.getAttribute("data-live");
  // The page's own address: a page shown in answer to a form carries it, so that reloading it
  // does not send the form again and live updates fetch the page, not the form's target.
  var page = document.body.getAttribute("data-page");
  if (page && page !== location.pathname + location.search && window.history.replaceState) {
    history.replaceState(null, "", page);
  }
  if (!url || !window.EventSource || !window.fetch || !window.DOMParser) return;

  var timer = null, running = false, again = false;

  function editing(part) {
    var active = document.activeElement;
    if (active && part.contains(active) && /^(TEXTAREA|INPUT|SELECT)$/.test(active.tagName)) return true;
    var fields = part.querySelectorAll("textarea, input[type=text]");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value !== fields[i].defaultValue) return true;
    }
    var selects = part.querySelectorAll("select");
    for (var j = 0; j < selects.length; j++) {
      var chosen = 0;
      for (var k = 0; k < selects[j].options.length; k++) {
        if (selects[j].options[k].defaultSelected) chosen = k;
      }
      if (selects[j].selectedIndex !== chosen) return true;
    }
    return false;
  }

  function swap(doc) {
    var parts = doc.querySelectorAll("[data-part][id]");
    for (var i = 0; i < parts.length; i++) {
      var next = parts[i], old = document.getElementById(next.id);
      if (!old || old.outerHTML === next.outerHTML) continue;
      if (editing(old)) { old.classList.add("stale"); continue; }
      // Keep the keyboard where it was: focus moves to the same control in the new part.
      var focused = document.activeElement, key = null;
      if (focused && old.contains(focused)) key = focused.id || focused.getAttribute("href") || focused.getAttribute("name");
      var fresh = document.importNode(next, true);
      old.replaceWith(fresh);
      if (key) {
        var same = document.getElementById(key) ||
          fresh.querySelector('[href="' + CSS.escape(key) + '"], [name="' + CSS.escape(key) + '"]');
        if (same) same.focus();
      }
    }
    document.title = doc.title;
  }

  function refresh() {
    if (running) { again = true; return; }
    running = true;
    fetch(page || location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (resp) { return resp.ok ? resp.text() : null; })
      .then(function (html) {
        if (html) swap(new DOMParser().parseFromString(html, "text/html"));
      })
      .catch(function () {})
      .then(function () {
        running = false;
        if (again) { again = false; refresh(); }
      });
  }

  var events = new EventSource(url);
  events.addEventListener("change", function () {
    clearTimeout(timer);
    timer = setTimeout(refresh, 100);
  });
  // A part left stale while the user typed is brought up to date once they leave it.
  document.addEventListener("focusout", function () {
    setTimeout(function () {
      if (document.querySelector(".stale")) refresh();
    }, 0);
  });
  document.body.setAttribute("data-live-ready", "true");
})();
