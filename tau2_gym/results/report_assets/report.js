// tau2-gym report: renders one simulation's details on demand from its JSON block (the script element with
// id "s" + index). Everything goes in through textContent (never innerHTML): message contents are untrusted.
(function () {
  "use strict";
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function fmt(x) { return (typeof x === "number") ? (Math.round(x * 10000) / 10000).toString() : String(x); }
  function json(v) { try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); } }
  function short(s, n) { s = String(s).replace(/\s+/g, " "); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }

  function table(heads, rows, cls) {
    var t = el("table", cls);
    if (heads) {
      var tr = add(add(t, el("thead")), el("tr"));
      heads.forEach(function (h) { add(tr, el("th", null, h)); });
    }
    var tb = add(t, el("tbody"));
    rows.forEach(function (r) {
      var row = add(tb, el("tr"));
      r.forEach(function (c, j) {
        var td = add(row, el(!heads && j === 0 ? "th" : "td"));
        if (c instanceof Node) td.appendChild(c); else td.textContent = String(c === null || c === undefined ? "" : c);
      });
    });
    return t;
  }

  function message(m) {
    var role = m[0], content = m[1], calls = m[2], error = m[3], who = m[4];
    var box = el("div", "msg " + role + (error ? " err" : ""));
    add(box, el("div", "role", role + (who && role === "tool" ? " \u2192 " + who : "") + (error ? " \u00b7 error" : "")));
    if (role === "tool") {
      var d = add(box, el("details"));
      add(d, el("summary", error ? "bad" : null, short(content === null ? "" : content, 110)));
      add(d, el("pre", null, content === null ? "" : content));
      return box;
    }
    if (content !== null && content !== "") add(box, el("div", "text", content));
    (calls || []).forEach(function (c) {
      var args = typeof c[1] === "string" ? c[1] : JSON.stringify(c[1]);
      var d = add(box, el("details", "call"));
      var s = add(d, el("summary", c[2] ? "bad" : null, "\u2192 " + c[0] + "(" + short(args, 90) + ")"));
      if (c[2]) s.title = "not a tool of this domain";
      add(d, el("pre", null, typeof c[1] === "string" ? c[1] : json(c[1])));
    });
    return box;
  }

  function render(i, d) {
    var root = document.getElementById("detail");
    root.textContent = "";
    var head = add(root, el("h3", null, "Task " + d.task + " \u00b7 trial " + (d.trial === null ? "\u2013" : d.trial) +
                                        " \u00b7 " + d.run));
    var close = add(head, el("a", "close", "\u00d7"));
    close.href = "#"; close.title = "close";
    close.addEventListener("click", function (ev) {  // close without jumping to the top of the page
      ev.preventDefault();
      history.pushState(null, "", location.pathname + location.search);
      route();
    });
    var facts = [["reward", d.reward === null ? "not scored" : fmt(d.reward)], ["termination", d.term],
                 ["simulation id", d.id], ["seed", d.seed], ["duration (s)", d.dur === null ? "" : fmt(d.dur)],
                 ["messages", d.m.length]];
    if (d.cost) facts.push(["tokens / cost", d.cost]);
    if (d.error) facts.push(["error", d.error]);
    add(root, table(null, facts, "facts"));
    if (d.breakdown) {
      add(root, el("h3", null, "Reward components"));
      var keys = Object.keys(d.breakdown);
      add(root, table(["component", "reward", "in reward basis"], keys.map(function (k) {
        return [k, fmt(d.breakdown[k]), (d.basis || []).indexOf(k) >= 0 ? "yes" : "no"];
      })));
    }
    var failed = d.checks.filter(function (c) { return !c[1]; });
    add(root, el("h3", null, "Failed checks (" + failed.length + " of " + d.checks.length + ")"));
    if (failed.length) {
      add(root, table(["component", "check"], failed.map(function (c) { return [c[0], c[2]]; })));
    }
    if (d.checks.length) {
      var all = add(root, el("details"));
      add(all, el("summary", null, "all checks"));
      add(all, table(["component", "met", "check"], d.checks.map(function (c) {
        return [c[0], el("span", c[1] ? "good" : "bad", c[1] ? "yes" : "no"), c[2]];
      })));
    }
    if (d.diff) {
      add(root, el("h3", null, "DB diff (" + d.diff.length + (d.diff_more ? " + " + d.diff_more + " left out" : "") + ")"));
      add(root, table(["db", "path", "kind", "gold", "agent"], d.diff.map(function (e) {
        e = e || {};
        return [e.db, e.path === "" ? "(whole DB)" : e.path, e.kind, el("pre", null, json(e.gold)),
                el("pre", null, json(e.predicted))];
      }), "dbdiff"));
    }
    add(root, el("h3", null, "Conversation"));
    var conv = add(root, el("div", "conversation"));
    d.m.forEach(function (m) { add(conv, message(m)); });
    var prev = document.querySelector("a.c.sel");
    if (prev) prev.classList.remove("sel");
    var cell = document.querySelector('a.c[href="#s' + i + '"]');
    if (cell) cell.classList.add("sel");
  }

  // Compressed reports: chunks of simulations, gzip + base64, unpacked once each on first use.
  var chunks = {};
  function chunk(k) {
    if (!chunks[k]) {
      var src = document.getElementById("c" + k);
      if (!src) return Promise.resolve(null);
      if (typeof DecompressionStream === "undefined") {
        return Promise.reject(new Error("this browser cannot unpack compressed reports (no DecompressionStream)"));
      }
      var bin = atob(src.textContent.trim()), bytes = new Uint8Array(bin.length);
      for (var j = 0; j < bin.length; j++) bytes[j] = bin.charCodeAt(j);
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      chunks[k] = new Response(stream).text().then(JSON.parse);
    }
    return chunks[k];
  }
  function show(i, d) {
    var root = document.getElementById("detail");
    if (!d) { root.textContent = "no such simulation"; return; }
    render(i, d);
    root.scrollTop = 0;
  }
  function route() {
    var m = /^#s(\d+)$/.exec(location.hash);
    var root = document.getElementById("detail");
    if (!m) { root.textContent = ""; return; }
    var i = parseInt(m[1], 10), src = document.getElementById("s" + i);
    if (src) { show(i, JSON.parse(src.textContent)); return; }
    var meta = document.getElementById("chunks");
    if (!meta) { show(i, null); return; }
    var size = JSON.parse(meta.textContent).size;
    chunk(Math.floor(i / size)).then(function (arr) {
      if (location.hash === "#s" + i) show(i, arr && arr[i % size]);
    }, function (err) { root.textContent = String(err && err.message || err); });
  }
  window.addEventListener("hashchange", route);
  if (location.hash) route();
})();
