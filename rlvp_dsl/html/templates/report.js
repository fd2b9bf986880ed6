// The report's script: the episode list (sort, filter by rule) and each episode's timeline,
// drawn only when the episode is opened.  Every trajectory text goes in through textContent.
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("rlvp-data").textContent);
  const RULES = DATA.rules;
  const EPISODES = DATA.episodes;
  const rows = document.getElementById("episode-rows");
  const filter = document.getElementById("rule-filter");
  const state = { key: "n", desc: false, rule: "" };
  let maxAbs = 1e-9;  // the largest |credit|: a badge's opacity grows with |value|
  EPISODES.forEach(e => e.events.forEach(ev => ev.credits.forEach(c => { maxAbs = Math.max(maxAbs, Math.abs(c.value)); })));

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }
  function fmt(x, digits) {  // never a negative zero: -4e-17 is 0.00
    if (x === null || x === undefined) return "n/a";
    const text = x.toFixed(digits);
    if (Number(text) === 0) return (0).toFixed(digits);
    return (x > 0 ? "+" : "") + text;
  }
  function hue(r) { return (r * 67) % 360; }
  function sign(x) { const r = Math.round(x * 1e9); return r > 0 ? "pos" : (r < 0 ? "neg" : "zero"); }  // model.sign_of

  function srcLink(item) {
    if (item.src === null || item.src === undefined || !item.line) return el("span", "loc", item.location);
    const a = el("a", "src-link-inline", item.location);
    a.href = "#src-" + item.src + "-L" + item.line;
    a.dataset.src = item.src; a.dataset.line = item.line;
    return a;
  }
  function eventLink(ep, index, text) {
    const a = el("a", "event-link", text);
    a.href = "#ep-" + ep.n + "-ev-" + index;
    a.dataset.event = index;
    return a;
  }

  function drawCredit(ep, c) {
    const box = el("div", "credit");
    box.dataset.rule = c.rule;
    box.dataset.ruleIndex = c.r;
    const badge = el("span", "badge " + sign(c.value), fmt(c.value, 2));
    badge.style.setProperty("--rule-hue", hue(c.r));
    badge.style.opacity = String(0.55 + 0.45 * Math.min(1, Math.abs(c.value) / maxAbs));
    badge.dataset.rule = c.rule;
    badge.dataset.value = String(c.value);
    badge.title = c.rule + " (" + c.kind + (c.trigger !== "fire" ? ", " + c.trigger : "") + "): " + c.reason;
    box.append(badge, el("span", "rule", c.rule), el("span", "reason", c.reason), srcLink(c));
    if (c.link) {
      const words = c.link.what === "opened" ? "opened at event " : (c.link.what === "expired" ? "expired at event " : "episode ended at event ");
      box.append(eventLink(ep, c.link.event, words + c.link.event));
    }
    return box;
  }

  function drawEvent(ep, ev) {
    const li = el("li", "event " + ev.kind);
    li.id = "ep-" + ep.n + "-ev-" + ev.index;
    li.dataset.event = ev.index;
    const head = el("div", "ev-head", "[" + ev.index + "] ");
    if (ev.kind === "call") {
      head.append(el("span", "", (ev.requestor ? ev.requestor + " " : "") + "call "), el("span", "tool", ev.tool === null ? "(no tool)" : ev.tool),
                  el("span", "status " + ev.status, ev.status));
      li.append(head);
      if (ev.args) li.append(el("code", "args", ev.args));
      if (ev.error && ev.error !== ev.result) li.append(el("div", "text error-text", ev.error));
      if (ev.result) {
        const pre = el("pre", "result", ev.result.length > RESULT_PREVIEW ? ev.result.slice(0, RESULT_PREVIEW) + " \u2026" : ev.result);
        li.append(pre);
        if (ev.result.length > RESULT_PREVIEW || ev.result_len > ev.result.length) {
          const more = el("button", "expand", "show all (" + ev.result_len + " characters" + (ev.result_len > ev.result.length ? ", first " + ev.result.length + " kept" : "") + ")");
          more.type = "button";
          more.addEventListener("click", function (e) {
            e.stopPropagation();
            const open = more.dataset.open === "1";
            pre.textContent = open ? ev.result.slice(0, RESULT_PREVIEW) + " \u2026" : ev.result;
            more.dataset.open = open ? "0" : "1";
            more.textContent = open ? "show all (" + ev.result_len + " characters)" : "shorten";
          });
          li.append(more);
        }
      }
    } else {
      head.append(el("span", "", ev.kind));
      li.append(head, el("div", "text", ev.text));
    }
    if (ev.signals) {  // the environment's numbers after this event
      const box = el("div", "signals");
      Object.keys(ev.signals).forEach(function (name) {
        const v = ev.signals[name];
        const item = el("span", "signal", name + " = " + (v === null ? "n/a" : String(v)));
        item.dataset.signal = name;
        box.append(item);
      });
      li.append(box);
    }
    if (ev.credits.length) {
      const box = el("div", "credits");
      ev.credits.forEach(c => box.append(drawCredit(ep, c)));
      li.append(box);
    }
    ev.marks.forEach(function (m) {
      const mark = el("div", "mark", m.rule + ": " + (m.what === "opened" ? "the obligation opened here was discharged at " :
        "the obligation opened at event " + m.event + " expired here; credit at "));
      mark.dataset.rule = m.rule; mark.dataset.ruleIndex = m.r;
      mark.append(eventLink(ep, m.event, "event " + m.event));
      li.append(mark);
    });
    return li;
  }

  function drawTimeline(ep) {
    const ol = el("ol", "timeline");
    ol.dataset.episode = ep.n;
    ep.events.forEach(ev => ol.append(drawEvent(ep, ev)));
    if (ep.unplaced.length) {
      const li = el("li", "event unplaced", "credits naming no event of this episode:");
      ep.unplaced.forEach(c => li.append(drawCredit(ep, c)));
      ol.append(li);
    }
    applyRuleFilter(ol);
    return ol;
  }

  function applyRuleFilter(scope) {
    scope.querySelectorAll(".credit, .mark").forEach(function (node) {
      node.classList.toggle("hidden", state.rule !== "" && node.dataset.ruleIndex !== state.rule);
    });
  }

  function toggle(tr, ep) {
    const next = tr.nextElementSibling;
    if (next && next.classList.contains("timeline-row")) {
      next.remove(); tr.classList.remove("open"); return;
    }
    const row = el("tr", "timeline-row");
    row.dataset.episode = ep.n;
    const td = el("td", "timeline-cell");
    td.colSpan = 6;
    td.append(drawTimeline(ep));
    row.append(td);
    tr.after(row);
    tr.classList.add("open");
  }

  function episodeRow(ep) {
    const tr = el("tr", "episode");
    tr.id = "ep-" + ep.n;
    tr.dataset.episode = ep.n;
    tr.dataset.hit = ep.hit.join(" ");
    tr.append(el("td", "num", String(ep.n)), el("td", "", ep.id),
              el("td", "num", ep.outcome === null ? "n/a" : String(ep.outcome)),
              el("td", "num " + sign(ep.total), fmt(ep.total, 2)), el("td", "num", String(ep.calls)));
    const hits = el("td", "");
    ep.chips.forEach(function (c) {  // coloured by the sign of the rule's total; the rule's hue marks its edge
      const chip = el("span", "hit " + c.sign, c.rule + " " + fmt(c.total, 2));
      chip.style.setProperty("--rule-hue", hue(c.r));
      chip.dataset.rule = c.rule;
      hits.append(chip);
    });
    tr.append(hits);
    tr.addEventListener("click", () => toggle(tr, ep));
    return tr;
  }

  const built = EPISODES.map(episodeRow);  // rows are cheap; timelines are drawn on opening

  function order() {
    const key = state.key;
    const value = ep => (ep[key] === null ? -Infinity : ep[key]);
    const idx = EPISODES.map((_, k) => k);
    idx.sort((a, b) => (value(EPISODES[a]) - value(EPISODES[b])) * (state.desc ? -1 : 1) || a - b);
    return idx;
  }

  function redraw() {
    const fragment = document.createDocumentFragment();
    let shown = 0;
    order().forEach(function (k) {
      const tr = built[k];
      const visible = state.rule === "" || EPISODES[k].hit.indexOf(Number(state.rule)) >= 0;
      tr.classList.toggle("hidden", !visible);
      shown += visible ? 1 : 0;
      fragment.append(tr);
      const next = tr.nextElementSibling;
      if (next && next.classList.contains("timeline-row")) {
        next.classList.toggle("hidden", !visible);
        fragment.append(next);
      }
    });
    rows.append(fragment);
    document.getElementById("shown-count").textContent = shown + " of " + EPISODES.length + " episodes shown";
    document.querySelectorAll("button.sort").forEach(b => b.classList.toggle("active", b.dataset.key === state.key));
    applyRuleFilter(rows);
  }

  document.querySelectorAll("button.sort").forEach(function (b) {
    b.addEventListener("click", function () {
      if (state.key === b.dataset.key) state.desc = !state.desc; else { state.key = b.dataset.key; state.desc = b.dataset.key !== "n"; }
      redraw();
    });
  });
  filter.addEventListener("change", function () { state.rule = filter.value; redraw(); });
  document.querySelectorAll("button.filter-by").forEach(function (b) {
    b.addEventListener("click", function () {
      filter.value = filter.value === b.dataset.ruleIndex ? "" : b.dataset.ruleIndex;
      filter.dispatchEvent(new Event("change"));
      document.getElementById("episodes").scrollIntoView();
    });
  });
  // a link to a rule line highlights it in the source pane; a link to an event flashes it
  document.addEventListener("click", function (e) {
    const a = e.target.closest("a");
    if (!a) return;
    if (a.dataset.line) {
      document.querySelectorAll("pre.src .ln.current").forEach(n => n.classList.remove("current"));
      const line = document.getElementById("src-" + a.dataset.src + "-L" + a.dataset.line);
      if (line) { line.classList.add("current"); }
    }
  }, true);
  redraw();
  document.body.dataset.ready = "1";
})();
