// agent-team dashboard: countdowns, live refresh, answer forms. Plain JS, no build step.
//
// Live refresh fetches the same page every REFRESH_MS and swaps only the
// regions marked `data-live`, skipping any region the person is working in
// (focus inside, or a form they typed into), so typing an answer is never lost.
(function () {
  "use strict";

  var REFRESH_MS = 10000;
  // Where older versions kept a pasted token; it is removed on load (sign-in replaced it).
  var OLD_TOKEN_KEY = "agent-team.dashboard-token";
  var LOG_POLL_MS = 1500;
  var LOG_MAX_CHARS = 65536;
  var NAME_KEY = "agent-team.answer-name";

  // ---- countdowns ------------------------------------------------------------------------

  function two(n) {
    return String(n).padStart(2, "0");
  }

  // The same format as the server's `pages._span` for whole seconds: 3d 4h, 2h 05m, 3m 07s, 12 s.
  function formatSpan(ms) {
    var s = Math.floor(Math.abs(ms) / 1000);
    var d = Math.floor(s / 86400);
    var h = Math.floor((s % 86400) / 3600);
    var m = Math.floor((s % 3600) / 60);
    var sec = s % 60;
    if (d > 0) return d + "d " + h + "h";
    if (h > 0) return h + "h " + two(m) + "m";
    if (m > 0) return m + "m " + two(sec) + "s";
    return sec + " s";
  }

  // A running build's elapsed time: the server's figure plus the time since it arrived.
  function tickElapsed() {
    var nodes = document.querySelectorAll("[data-elapsed-s]");
    for (var i = 0; i < nodes.length; i++) {
      var el = nodes[i];
      var base = parseFloat(el.getAttribute("data-elapsed-s"));
      if (isNaN(base)) continue;
      if (!el.getAttribute("data-elapsed-at")) el.setAttribute("data-elapsed-at", String(Date.now()));
      var since = Date.now() - parseInt(el.getAttribute("data-elapsed-at"), 10);
      el.textContent = formatSpan(base * 1000 + since);
    }
  }

  function tickCountdowns() {
    var now = Date.now();
    var nodes = document.querySelectorAll("[data-deadline]");
    for (var i = 0; i < nodes.length; i++) {
      var el = nodes[i];
      var at = Date.parse(el.getAttribute("data-deadline"));
      if (isNaN(at)) continue;
      var left = at - now;
      el.textContent = left > 0 ? "in " + formatSpan(left) : "overdue by " + formatSpan(left);
      el.classList.toggle("overdue", left <= 0);
      el.classList.toggle("soon", left > 0 && left < 3600 * 1000);
    }
  }

  // ---- storage (private browsing may refuse it) -------------------------------------------

  function load(key) {
    try {
      return window.localStorage.getItem(key) || "";
    } catch (e) {
      return "";
    }
  }

  function save(key, value) {
    try {
      if (value) window.localStorage.setItem(key, value);
      else window.localStorage.removeItem(key);
    } catch (e) {
      /* nothing to do: the form still works, it just will not remember */
    }
  }

  // ---- answer forms -----------------------------------------------------------------------

  function show(result, kind, text) {
    result.className = "form-result " + kind;
    result.textContent = text;
  }

  function errorText(status, body) {
    // The API's 401 text is written for scripts too; a person in the page needs this.
    if (status === 401) return "Your sign-in has ended; sign in again to answer.";
    if (body && typeof body === "object") {
      var msg = body.error || body.detail || body.message;
      if (typeof msg === "string" && msg) return msg;
      if (msg && typeof msg.message === "string") return msg.message;
    }
    return "The answer was not accepted (HTTP " + status + ").";
  }

  function bindForm(form) {
    if (form.getAttribute("data-bound")) return;
    form.setAttribute("data-bound", "1");
    var name = form.querySelector("input[name=name]");
    if (name && !name.value) name.value = load(NAME_KEY);
    form.addEventListener("input", function () {
      form.setAttribute("data-dirty", "1");
    });
    var quick = form.querySelectorAll("[data-fill]");
    for (var i = 0; i < quick.length; i++) {
      quick[i].addEventListener("click", function (ev) {
        var field = form.querySelector("input[name=answer]");
        field.value = ev.currentTarget.getAttribute("data-fill");
        form.setAttribute("data-dirty", "1");
        field.focus();
        field.setSelectionRange(field.value.length, field.value.length);
      });
    }
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      submitAnswer(form);
    });
  }

  function submitAnswer(form) {
    var result = form.querySelector(".form-result");
    var button = form.querySelector("button[type=submit]");
    // A note form names its field ("text") and what success says; an answer form neither.
    var field = form.getAttribute("data-field") || "answer";
    var okText = form.getAttribute("data-ok") || "Accepted — the task resumes. Reloading…";
    var answer = form.querySelector("[name=" + field + "]").value.trim();
    // Only a sign-in with the shared (unnamed) token asks for a name.
    var nameField = form.querySelector("input[name=name]");
    var name = nameField ? nameField.value.trim() : "";
    var csrf = document.querySelector("meta[name=csrf-token]");
    if (!answer || (nameField && !name)) {
      var what = field === "answer" ? "the answer" : "the note";
      show(result, "error", nameField ? "Fill in " + what + " and your name." : "Fill in " + what + ".");
      return;
    }
    var payload = {};
    payload[field] = answer;
    if (nameField) payload.name = name;
    form.setAttribute("data-busy", "1");
    button.disabled = true;
    show(result, "", "Sending…");
    fetch(form.getAttribute("data-action"), {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Accept: "application/json",
        "X-CSRF-Token": csrf ? csrf.getAttribute("content") : "",
      },
      body: JSON.stringify(payload),
      cache: "no-store",
      credentials: "same-origin",
    })
      .then(function (res) {
        return res
          .json()
          .catch(function () {
            return null;
          })
          .then(function (body) {
            return { res: res, body: body };
          });
      })
      .then(function (r) {
        if (r.res.ok) {
          if (nameField) save(NAME_KEY, name);
          show(result, "ok", okText);
          window.setTimeout(function () {
            window.location.reload();
          }, 1200);
          return;
        }
        show(result, "error", errorText(r.res.status, r.body));
        form.removeAttribute("data-busy");
        button.disabled = false;
      })
      .catch(function () {
        show(result, "error", "Could not reach the dashboard; check the connection and retry.");
        form.removeAttribute("data-busy");
        button.disabled = false;
      });
  }

  // Sizes come as data attributes and are set here: the Content-Security-Policy allows no
  // inline style attributes (styles set from a script are allowed).
  function applySizes(root) {
    var bars = root.querySelectorAll("[data-width-pct]");
    for (var i = 0; i < bars.length; i++) {
      var pct = parseFloat(bars[i].getAttribute("data-width-pct"));
      if (!isNaN(pct)) bars[i].style.width = Math.max(0, Math.min(100, pct)) + "%";
    }
    var segs = root.querySelectorAll("[data-grow]");
    for (var j = 0; j < segs.length; j++) {
      var grow = parseFloat(segs[j].getAttribute("data-grow"));
      if (!isNaN(grow)) segs[j].style.setProperty("--grow", String(grow));
    }
  }

  function bindAll(root) {
    applySizes(root);
    var forms = root.querySelectorAll("form[data-answer-form], form[data-note-form]");
    for (var i = 0; i < forms.length; i++) bindForm(forms[i]);
  }

  // ---- task filters -----------------------------------------------------------------------

  // Blank fields mean "any": leave them out of the URL so it stays short and shareable.
  function bindFilters() {
    var forms = document.querySelectorAll("form[data-filter-form]");
    for (var i = 0; i < forms.length; i++) {
      forms[i].addEventListener("submit", function (ev) {
        var fields = ev.currentTarget.querySelectorAll("select, input");
        for (var j = 0; j < fields.length; j++) {
          if (fields[j].name && !fields[j].value.trim()) fields[j].disabled = true;
        }
      });
    }
    // The back button may show this page from the browser's cache, fields still disabled.
    window.addEventListener("pageshow", function () {
      var off = document.querySelectorAll("form[data-filter-form] [disabled]");
      for (var k = 0; k < off.length; k++) off[k].disabled = false;
    });
  }

  // ---- build output ---------------------------------------------------------------------

  // The card follows the build with small JSON polls (only the text after `end`); when the
  // build starts or stops, or the task can print no more, the card is drawn again by the
  // server (a live refresh), which knows how to say how it ended.
  var logBusy = false;

  function scrollLog(pre, force) {
    if (!pre) return;
    var atEnd = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    if (force || atEnd) pre.scrollTop = pre.scrollHeight;
  }

  function appendLog(pre, text) {
    var atEnd = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    var all = pre.textContent + text;
    if (all.length > LOG_MAX_CHARS) {
      all = all.slice(all.length - LOG_MAX_CHARS);
      all = all.slice(all.indexOf("\n") + 1);
    }
    pre.textContent = all;
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  function pollLog() {
    var card = document.querySelector("[data-build-log]");
    if (!card || logBusy || document.hidden) return;
    if (card.getAttribute("data-log-follow") !== "1") return;
    logBusy = true;
    var url = card.getAttribute("data-log-src") + "?after=" + card.getAttribute("data-log-end");
    fetch(url, { cache: "no-store", headers: { Accept: "application/json" } })
      .then(function (res) {
        if (!res.ok) throw new Error("HTTP " + res.status);
        return res.json();
      })
      .then(function (body) {
        var pre = card.querySelector("[data-log-text]");
        if (pre && body.text) {
          if (body.dropped) pre.textContent = "";
          appendLog(pre, body.text);
        }
        card.setAttribute("data-log-end", String(body.end));
        var elapsed = card.querySelector("[data-elapsed-s]");
        if (elapsed && body.elapsed_s !== null) {
          elapsed.setAttribute("data-elapsed-s", String(body.elapsed_s));
          elapsed.setAttribute("data-elapsed-at", String(Date.now()));
        }
        var wasRunning = card.getAttribute("data-log-running") === "1";
        if (!body.follow || body.running !== wasRunning || (body.exists && !pre)) {
          card.setAttribute("data-log-follow", "0");
          refresh();
        }
      })
      .catch(function () {
        stamp(false);
      })
      .then(function () {
        logBusy = false;
      });
  }

  // ---- live refresh -----------------------------------------------------------------------

  function busy(region) {
    // A build card that follows its build is kept up to date by pollLog instead.
    if (region.querySelector('[data-log-follow="1"]')) return true;
    var active = document.activeElement;
    if (active && active !== document.body && region.contains(active)) return true;
    return region.querySelector("form[data-dirty], form[data-busy]") !== null;
  }

  function stamp(ok) {
    var live = document.querySelector("[data-live-stamp]");
    if (!live) return;
    live.classList.toggle("stale", !ok);
    var label = live.querySelector(".live-label");
    if (!label) return;
    // UTC, like every time the server renders.
    var t = new Date();
    var at = two(t.getUTCHours()) + ":" + two(t.getUTCMinutes()) + ":" + two(t.getUTCSeconds());
    label.textContent = ok ? "updated " + at + " UTC" : "offline, retrying";
  }

  function refresh() {
    if (document.hidden) return;
    fetch(window.location.href, { cache: "no-store", headers: { Accept: "text/html" } })
      .then(function (res) {
        if (!res.ok) throw new Error("HTTP " + res.status);
        return res.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html");
        var regions = document.querySelectorAll("[data-live]");
        for (var i = 0; i < regions.length; i++) {
          var region = regions[i];
          var key = region.getAttribute("data-live");
          var next = fresh.querySelector('[data-live="' + key + '"]');
          if (!next || busy(region)) continue;
          var node = document.importNode(next, true);
          region.replaceWith(node);
          bindAll(node);
          scrollLog(node.querySelector("[data-log-text]"), true);
        }
        tickCountdowns();
        tickElapsed();
        stamp(true);
      })
      .catch(function () {
        stamp(false);
      });
  }

  function start() {
    save(OLD_TOKEN_KEY, "");
    bindAll(document);
    bindFilters();
    tickCountdowns();
    tickElapsed();
    scrollLog(document.querySelector("[data-log-text]"), true);
    window.setInterval(function () {
      tickCountdowns();
      tickElapsed();
    }, 1000);
    if (document.querySelector("[data-live=build-output]")) window.setInterval(pollLog, LOG_POLL_MS);
    if (document.querySelector("[data-live]")) {
      window.setInterval(refresh, REFRESH_MS);
      document.addEventListener("visibilitychange", function () {
        if (!document.hidden) refresh();
      });
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
