// agent-team dashboard: countdowns, live refresh, answer and action forms, times in the
// viewer's zone. Plain JS, no build step.
//
// Live refresh fetches the same page every REFRESH_MS and swaps only the
// regions marked `data-live`, skipping any region the person is working in
// (focus inside, a form they typed into, a confirmation they opened), so typing an
// answer is never lost.
//
// Every write is a `fetch` of the JSON API with the page's CSRF token (the
// `csrf-token` meta): the answer and note forms (`data-answer-form`,
// `data-note-form`) and the action forms (`data-json-form`: cancel, retry, reopen,
// a new task, automations). The API checks who may do what; the page only asks.
(function () {
  "use strict";

  var REFRESH_MS = 10000;
  // Where older versions kept a pasted token; it is removed on load (sign-in replaced it).
  var OLD_TOKEN_KEY = "agent-team.dashboard-token";
  var LOG_POLL_MS = 1500;
  var LOG_MAX_CHARS = 65536;
  var NAME_KEY = "agent-team.answer-name";
  // The viewer's choice of time zone for the times shown: "" (the browser's) or "UTC".
  var ZONE_KEY = "agent-team.time-zone";
  var RELOAD_MS = 1200;

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

  function errorText(status, body, what) {
    // The API's 401 text is written for scripts too; a person in the page needs this.
    if (status === 401) return "Your sign-in has ended; sign in again to " + (what || "answer") + ".";
    if (body && typeof body === "object") {
      var msg = body.error || body.detail || body.message;
      if (typeof msg === "string" && msg) return msg;
      if (msg && typeof msg.message === "string") return msg.message;
    }
    return (what ? "That was not done" : "The answer was not accepted") + " (HTTP " + status + ").";
  }

  function csrfToken() {
    var meta = document.querySelector("meta[name=csrf-token]");
    return meta ? meta.getAttribute("content") : "";
  }

  // A response's JSON body (null when it has none), with the response.
  function readJson(res) {
    return res
      .json()
      .catch(function () {
        return null;
      })
      .then(function (body) {
        return { res: res, body: body };
      });
  }

  function postJson(url, method, payload, extraHeaders) {
    var headers = {
      "Content-Type": "application/json",
      Accept: "application/json",
      "X-CSRF-Token": csrfToken(),
    };
    for (var key in extraHeaders || {}) headers[key] = extraHeaders[key];
    return fetch(url, {
      method: method || "POST",
      headers: headers,
      body: JSON.stringify(payload),
      cache: "no-store",
      credentials: "same-origin",
    }).then(readJson);
  }

  // Enter sends a one-line answer as the old input did; Shift+Enter starts a new line.
  function submitOnEnter(field, form) {
    field.addEventListener("keydown", function (ev) {
      if (ev.key !== "Enter" || ev.shiftKey || ev.isComposing) return;
      ev.preventDefault();
      if (form.requestSubmit) form.requestSubmit();
      else form.dispatchEvent(new Event("submit", { cancelable: true }));
    });
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
        var field = form.querySelector("[name=answer]");
        field.value = ev.currentTarget.getAttribute("data-fill");
        form.setAttribute("data-dirty", "1");
        field.focus();
        field.setSelectionRange(field.value.length, field.value.length);
      });
    }
    var enters = form.querySelectorAll("[data-submit-on-enter]");
    for (var k = 0; k < enters.length; k++) submitOnEnter(enters[k], form);
    if (form.hasAttribute("data-plan-editor")) bindPlanEditor(form);
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      // A button that is the whole answer (the inbox's Approve, Reject) fills the field.
      var sent = ev.submitter && ev.submitter.getAttribute("data-send");
      if (sent) form.querySelector("[name=answer]").value = sent;
      submitAnswer(form);
    });
  }

  function submitAnswer(form) {
    var result = form.querySelector(".form-result");
    // A note form names its field ("text") and what success says; an answer form neither.
    var field = form.getAttribute("data-field") || "answer";
    var okText = form.getAttribute("data-ok") || "Accepted — the task resumes. Reloading…";
    var answer = form.querySelector("[name=" + field + "]").value.trim();
    // Only a sign-in with the shared (unnamed) token asks for a name.
    var nameField = form.querySelector("input[name=name]");
    var name = nameField ? nameField.value.trim() : "";
    if (!answer || (nameField && !name)) {
      var what = field === "answer" ? "the answer" : "the note";
      show(result, "error", nameField ? "Fill in " + what + " and your name." : "Fill in " + what + ".");
      return;
    }
    if (form.hasAttribute("data-plan-editor") && !planChanged(form)) {
      show(result, "error", "The plan is unchanged: change it first, or approve it as it is.");
      return;
    }
    var payload = {};
    // The plan editor sends `edit` and the plan on the lines after it.
    payload[field] = (form.getAttribute("data-prefix") || "") + answer;
    if (nameField) payload.name = name;
    var buttons = form.querySelectorAll("button");
    var setBusy = function (on) {
      if (on) form.setAttribute("data-busy", "1");
      else form.removeAttribute("data-busy");
      for (var i = 0; i < buttons.length; i++) buttons[i].disabled = on;
    };
    setBusy(true);
    show(result, "", "Sending…");
    postJson(form.getAttribute("data-action"), "POST", payload)
      .then(function (r) {
        if (r.res.ok) {
          if (nameField) save(NAME_KEY, name);
          if (form.getAttribute("data-then") === "stay") {
            // The inbox: the row says it is done and the next one can be answered at once.
            show(result, "ok", okText.replace("{answer}", answer));
            form.removeAttribute("data-busy");
            form.removeAttribute("data-dirty");
            form.setAttribute("data-done", "1");
            return;
          }
          show(result, "ok", okText);
          window.setTimeout(function () {
            window.location.reload();
          }, RELOAD_MS);
          return;
        }
        show(result, "error", errorText(r.res.status, r.body));
        setBusy(false);
      })
      .catch(function () {
        show(result, "error", "Could not reach the dashboard; check the connection and retry.");
        setBusy(false);
      });
  }

  // ---- the plan editor ----------------------------------------------------------------------

  // The same rules as the server's plan diff (`reports/plandiff.py`): blank lines are left
  // out, and numbered steps compare without their numbers and runs of spaces.
  function planLines(text) {
    return text
      .replace(/\r\n/g, "\n")
      .split("\n")
      .filter(function (line) {
        return line.trim() !== "";
      });
  }

  function planKey(line) {
    return line
      .replace(/^\s*\d+[.)]\s+/, "")
      .split(/\s+/)
      .filter(Boolean)
      .join(" ");
  }

  // A line diff (longest common subsequence): [kind, text] with kind add, del or same, the
  // removed lines where they were.
  function diffPlan(before, after) {
    var a = before.map(planKey);
    var b = after.map(planKey);
    var n = a.length;
    var m = b.length;
    var out = [];
    if (n * m > 400000) {
      // Too long to compare line by line in a page: all out, all in.
      before.forEach(function (line) { out.push(["del", line]); });
      after.forEach(function (line) { out.push(["add", line]); });
      return out;
    }
    var table = [];
    for (var r = 0; r <= n; r++) table.push(new Array(m + 1).fill(0));
    for (var i = n - 1; i >= 0; i--) {
      for (var j = m - 1; j >= 0; j--) {
        table[i][j] = a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
      }
    }
    var x = 0;
    var y = 0;
    while (x < n && y < m) {
      if (a[x] === b[y]) {
        out.push(["same", after[y]]);
        x++;
        y++;
      } else if (table[x + 1][y] >= table[x][y + 1]) {
        out.push(["del", before[x++]]);
      } else {
        out.push(["add", after[y++]]);
      }
    }
    while (x < n) out.push(["del", before[x++]]);
    while (y < m) out.push(["add", after[y++]]);
    return out;
  }

  function planChanged(form) {
    var original = form.querySelector("[data-plan-original]").value;
    var edited = form.querySelector("[name=answer]").value;
    return diffPlan(planLines(original), planLines(edited)).some(function (row) {
      return row[0] !== "same";
    });
  }

  function drawPlanDiff(form) {
    var original = form.querySelector("[data-plan-original]").value;
    var edited = form.querySelector("[name=answer]").value;
    var rows = diffPlan(planLines(original), planLines(edited));
    var list = form.querySelector("[data-plan-diff]");
    var unchanged = form.querySelector("[data-plan-unchanged]");
    var changed = rows.some(function (row) {
      return row[0] !== "same";
    });
    list.textContent = "";
    list.hidden = !changed;
    unchanged.hidden = changed;
    if (!changed) return;
    rows.forEach(function (row) {
      var item = document.createElement("li");
      item.className = "d-" + row[0];
      var mark = document.createElement("span");
      mark.className = "mark";
      mark.textContent = row[0] === "add" ? "+" : row[0] === "del" ? "\u2212" : "";
      var holder = item;
      if (row[0] !== "same") {
        holder = document.createElement(row[0] === "add" ? "ins" : "del");
        item.appendChild(holder);
      }
      holder.appendChild(mark);
      holder.appendChild(document.createTextNode(" " + row[1]));
      list.appendChild(item);
    });
  }

  function bindPlanEditor(form) {
    var field = form.querySelector("[name=answer]");
    field.addEventListener("input", function () {
      drawPlanDiff(form);
    });
    drawPlanDiff(form);
  }

  // ---- action forms (cancel, retry, reopen, a new task, automations) -----------------------

  function fieldsOf(form) {
    return form.querySelectorAll("input[name], select[name], textarea[name]");
  }

  function initialOf(el) {
    if (el.type === "checkbox") return String(el.defaultChecked);
    if (el.tagName === "SELECT") {
      for (var i = 0; i < el.options.length; i++) if (el.options[i].defaultSelected) return el.options[i].value;
      return el.options.length ? el.options[0].value : "";
    }
    return el.defaultValue;
  }

  function currentOf(el) {
    return el.type === "checkbox" ? String(el.checked) : el.value;
  }

  function valueOf(el) {
    if (el.getAttribute("data-json") === "bool") return el.type === "checkbox" ? el.checked : el.value === "true";
    return el.tagName === "TEXTAREA" ? el.value : el.value.trim();
  }

  function changed(el) {
    return currentOf(el) !== initialOf(el);
  }

  // A group of fields that only mean something together (a schedule): sent whole once one of
  // them, or the choice that shows the group, changed.
  function groupChanged(form, group) {
    var chooser = form.querySelector("select[data-choose]");
    if (chooser && group.getAttribute("data-choice") && changed(chooser)) return true;
    var inside = fieldsOf(group);
    for (var i = 0; i < inside.length; i++) if (!inside[i].matches(":disabled") && changed(inside[i])) return true;
    return false;
  }

  function payloadOf(form) {
    var changedOnly = form.hasAttribute("data-changed-only");
    var payload = {};
    var fields = fieldsOf(form);
    for (var i = 0; i < fields.length; i++) {
      var el = fields[i];
      if (el.matches(":disabled")) continue;
      var value = valueOf(el);
      if (changedOnly) {
        var group = el.closest("[data-together]");
        if (!changed(el) && !(group && groupChanged(form, group))) continue;
      } else if (value === "") {
        continue; // blank: not given (the API's default)
      }
      payload[el.name] = value;
    }
    return payload;
  }

  // Shows the fields of the chosen schedule and disables the others, so they are not sent.
  function applyChoices(form) {
    var chooser = form.querySelector("select[data-choose]");
    if (!chooser) return;
    var groups = form.querySelectorAll("[data-choice]");
    for (var i = 0; i < groups.length; i++) {
      var on = groups[i].getAttribute("data-choice") === chooser.value;
      groups[i].hidden = !on;
      groups[i].disabled = !on;
    }
  }

  function newKey() {
    var bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    return Array.prototype.map
      .call(bytes, function (b) {
        return b.toString(16).padStart(2, "0");
      })
      .join("");
  }

  function submitJson(form) {
    var result = form.querySelector(".form-result");
    var method = form.getAttribute("data-method") || "POST";
    var payload = payloadOf(form);
    if (form.hasAttribute("data-changed-only") && !Object.keys(payload).length) {
      show(result, "error", "Nothing changed: change a field first.");
      return;
    }
    var headers = {};
    if (form.hasAttribute("data-idempotent")) {
      // One key per version of the form: a retry after a lost answer gets the same task back.
      if (!form.getAttribute("data-key")) form.setAttribute("data-key", newKey());
      headers["Idempotency-Key"] = form.getAttribute("data-key");
    }
    var invalid = form.querySelectorAll("[aria-invalid]");
    for (var i = 0; i < invalid.length; i++) invalid[i].removeAttribute("aria-invalid");
    var buttons = form.querySelectorAll("button");
    var setBusy = function (on) {
      if (on) form.setAttribute("data-busy", "1");
      else form.removeAttribute("data-busy");
      for (var j = 0; j < buttons.length; j++) buttons[j].disabled = on;
    };
    setBusy(true);
    show(result, "", "Sending…");
    postJson(form.getAttribute("data-action"), method, payload, headers)
      .then(function (r) {
        if (r.res.ok) {
          var then = form.getAttribute("data-then");
          var okText = form.getAttribute("data-ok") || "Done.";
          show(result, "ok", okText);
          form.removeAttribute("data-dirty");
          if (then === "task" && r.body && r.body.task_id) {
            window.location.assign(form.getAttribute("data-task-href") + encodeURIComponent(r.body.task_id));
            return;
          }
          if (then === "stay") {
            form.removeAttribute("data-busy");
            form.setAttribute("data-done", "1");
            return;
          }
          window.setTimeout(function () {
            window.location.reload();
          }, RELOAD_MS);
          return;
        }
        show(result, "error", errorText(r.res.status, r.body, "do this"));
        var field = r.body && (r.body.field || r.body.parameter);
        var bad = field ? form.querySelector('[name="' + field + '"]') : null;
        if (bad) {
          bad.setAttribute("aria-invalid", "true");
          bad.focus();
        }
        setBusy(false);
      })
      .catch(function () {
        show(result, "error", "Could not reach the dashboard; check the connection and retry.");
        setBusy(false);
      });
  }

  function bindJsonForm(form) {
    if (form.getAttribute("data-bound")) return;
    form.setAttribute("data-bound", "1");
    applyChoices(form);
    var zones = form.querySelectorAll("input[data-default-zone]");
    for (var i = 0; i < zones.length; i++) if (!zones[i].value) zones[i].value = browserZone() || "UTC";
    form.addEventListener("input", function () {
      form.setAttribute("data-dirty", "1");
      form.removeAttribute("data-key"); // a changed request is a new request
    });
    form.addEventListener("change", function (ev) {
      if (ev.target.matches && ev.target.matches("select[data-choose]")) applyChoices(form);
    });
    var previews = form.querySelectorAll("[data-preview]");
    for (var k = 0; k < previews.length; k++) bindPreview(form, previews[k]);
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      submitJson(form);
    });
  }

  // The new-task form's Preview: the body as the task page will show it, drawn by the server
  // (`safe_markdown`), so what you see is what the page shows.
  function bindPreview(form, button) {
    var field = form.querySelector(button.getAttribute("data-preview"));
    var out = form.querySelector("[data-preview-out]");
    var writeLabel = button.textContent;
    button.addEventListener("click", function () {
      if (!out.hidden) {
        out.hidden = true;
        field.hidden = false;
        button.textContent = writeLabel;
        button.setAttribute("aria-pressed", "false");
        field.focus();
        return;
      }
      button.disabled = true;
      postJson(button.getAttribute("data-preview-action"), "POST", { markdown: field.value })
        .then(function (r) {
          button.disabled = false;
          if (!r.res.ok) {
            show(form.querySelector(".form-result"), "error", errorText(r.res.status, r.body, "preview"));
            return;
          }
          // The server escaped every character it was given and added only fixed tags.
          out.innerHTML = r.body.html || '<p class="empty">Nothing to preview yet.</p>';
          out.hidden = false;
          field.hidden = true;
          button.textContent = "Edit";
          button.setAttribute("aria-pressed", "true");
        })
        .catch(function () {
          button.disabled = false;
          show(form.querySelector(".form-result"), "error", "Could not reach the dashboard to preview.");
        });
    });
  }

  // ---- times in the viewer's zone ---------------------------------------------------------

  function browserZone() {
    try {
      return Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    } catch (e) {
      return "";
    }
  }

  function chosenZone() {
    return load(ZONE_KEY) === "UTC" ? "UTC" : undefined;
  }

  // `2026-03-02 11:00 CET` (or `11:00 CET` without the date), in the chosen zone.
  function formatTime(at, withDate, seconds) {
    var options = { hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "short" };
    if (seconds) options.second = "2-digit";
    if (withDate) {
      options.year = "numeric";
      options.month = "2-digit";
      options.day = "2-digit";
    }
    var zone = chosenZone();
    if (zone) options.timeZone = zone;
    var parts = {};
    new Intl.DateTimeFormat("en-GB", options).formatToParts(at).forEach(function (part) {
      parts[part.type] = part.value;
    });
    var clock = parts.hour + ":" + parts.minute + (seconds ? ":" + parts.second : "") + " " + parts.timeZoneName;
    return withDate ? parts.year + "-" + parts.month + "-" + parts.day + " " + clock : clock;
  }

  // Every `<time data-local>` the server wrote in UTC, in the viewer's zone; UTC on hover.
  function localizeTimes(root) {
    var nodes = root.querySelectorAll("time[data-local]");
    for (var i = 0; i < nodes.length; i++) {
      var el = nodes[i];
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at.getTime())) continue;
      if (!el.hasAttribute("data-utc")) el.setAttribute("data-utc", el.getAttribute("title") || el.textContent);
      try {
        el.textContent = formatTime(at, el.getAttribute("data-local") === "datetime", false);
        el.title = el.getAttribute("data-utc");
      } catch (e) {
        return; // no Intl time zones here: the UTC text stays
      }
    }
  }

  function bindZoneChoice() {
    var footer = document.querySelector("[data-zone-footer]");
    var select = document.querySelector("[data-zone-choice]");
    if (!footer || !select) return;
    var zone = browserZone();
    if (zone) select.options[0].textContent = "your time zone (" + zone + ")";
    select.value = load(ZONE_KEY) === "UTC" ? "UTC" : "";
    footer.hidden = false;
    select.addEventListener("change", function () {
      save(ZONE_KEY, select.value);
      localizeTimes(document);
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
    localizeTimes(root);
    var forms = root.querySelectorAll("form[data-answer-form], form[data-note-form], form[data-plan-editor]");
    for (var i = 0; i < forms.length; i++) bindForm(forms[i]);
    var actions = root.querySelectorAll("form[data-json-form]");
    for (var j = 0; j < actions.length; j++) bindJsonForm(actions[j]);
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
    if (region.querySelector("details[data-keep-open][open]")) return true; // a confirmation
    return region.querySelector("form[data-dirty], form[data-busy]") !== null;
  }

  function stamp(ok) {
    var live = document.querySelector("[data-live-stamp]");
    if (!live) return;
    live.classList.toggle("stale", !ok);
    var label = live.querySelector(".live-label");
    if (!label) return;
    var at;
    try {
      at = formatTime(new Date(), false, true);
    } catch (e) {
      var t = new Date();
      at = two(t.getUTCHours()) + ":" + two(t.getUTCMinutes()) + ":" + two(t.getUTCSeconds()) + " UTC";
    }
    label.textContent = ok ? "updated " + at : "offline, retrying";
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
    bindZoneChoice();
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
