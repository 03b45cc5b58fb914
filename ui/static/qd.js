// qd's dashboard: live updates of a page's live part over Server-Sent
// Events, the throughput charts, and drag-to-zoom on the timeline. No
// build step; htmx and uPlot are vendored next to this file.
"use strict";
(function () {
  var colors = { completed: "#2e7d32", failed: "#c62828", abandoned: "#ef6c00", cancelled: "#757575" };

  // follow keeps #live up to date: the server sends its new HTML whenever
  // it changes. A stream refused outright (the dashboard holds as many as
  // it may: 503) is not retried by the browser, so it is tried again here
  // after a while.
  function follow() {
    var live = document.getElementById("live");
    var conn = document.getElementById("conn");
    if (!live || !live.hasAttribute("data-live") || !window.EventSource) return;
    var es = new EventSource(location.pathname + location.search);
    es.onopen = function () { conn.textContent = "live"; conn.className = "conn on"; };
    es.onerror = function () {
      conn.className = "conn off";
      if (es.readyState !== EventSource.CLOSED) {
        conn.textContent = "reconnecting";
        return;
      }
      conn.textContent = "not live (the dashboard is busy); retrying";
      setTimeout(follow, 15000);
    };
    es.onmessage = function (e) {
      var open = {};
      live.querySelectorAll("details[id], section[id] details").forEach(function (d, i) { open[i] = d.open; });
      live.innerHTML = e.data;
      live.querySelectorAll("details[id], section[id] details").forEach(function (d, i) { if (i in open) d.open = open[i]; });
      live.querySelectorAll("pre.output").forEach(function (p) { p.scrollTop = p.scrollHeight; });
      if (window.htmx) window.htmx.process(live);
      charts();
    };
    window.addEventListener("pagehide", function () { es.close(); });
  }

  // clock writes a time (seconds) on the 24-hour clock, as every other
  // page does, with the day when withDay: uPlot's own axis and legend
  // would write some of them on the 12-hour clock.
  function clock(secs, withDay) {
    var d = new Date(secs * 1000), two = function (n) { return (n < 10 ? "0" : "") + n; };
    var t = two(d.getHours()) + ":" + two(d.getMinutes());
    return withDay ? d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) + " " + t : t;
  }

  function chart(el, title, series, data, unit) {
    if (!el) return;
    el.textContent = "";
    var opts = {
      title: title,
      width: Math.max(el.clientWidth, 320),
      height: 240,
      series: [{ value: function (u, v) { return v == null ? "" : clock(v, true); } }].concat(series),
      axes: [{
        values: function (u, splits) {
          var span = splits.length > 1 ? splits[splits.length - 1] - splits[0] : 0;
          return splits.map(function (v) { return clock(v, span > 86400); });
        },
      }, { label: unit, size: 60 }],
      scales: { x: { time: true } },
    };
    new window.uPlot(opts, data, el);
  }

  // charts draws the throughput page's two charts from its JSON.
  function charts() {
    var src = document.getElementById("chart-data");
    if (!src || !window.uPlot) return;
    var d = JSON.parse(src.textContent);
    var finished = d.outcomes.map(function (o) {
      return { label: o, stroke: colors[o], width: 1.5, points: { show: false } };
    });
    chart(document.getElementById("chart-finished"), "Runs finished per " + d.bucket, finished, [d.t].concat(d.finished), "runs");
    var wait = ["p50", "p90", "p99"].map(function (p, i) {
      return { label: p, stroke: ["#1565c0", "#6a1b9a", "#ad1457"][i], width: 1.5, points: { show: false } };
    });
    chart(document.getElementById("chart-wait"), "Queue wait (seconds)", wait, [d.t].concat(d.wait), "seconds");
    // What the agents reported spending (qd usage), per agent: drawn
    // only when one did.
    var palette = ["#2e7d32", "#ef6c00", "#1565c0", "#6a1b9a", "#ad1457", "#00838f", "#5d4037", "#9e9d24"];
    var usage = (d.agents || []).map(function (a, i) {
      return { label: a, stroke: palette[i % palette.length], width: 1.5, points: { show: false } };
    });
    if (usage.length) {
      chart(document.getElementById("chart-usage"), "Usage reported per " + d.bucket + ", by agent", usage, [d.t].concat(d.usage), "usage");
    }
  }

  // zoom lets a drag across the timeline choose the span to show.
  function zoom() {
    var start = null, band = null;
    function at(svg, clientX) {
      var box = svg.getBoundingClientRect();
      var x = (clientX - box.left) / box.width * 1000;
      var f = Math.min(Math.max((x - 120) / 880, 0), 1);
      var from = Number(svg.dataset.from), to = Number(svg.dataset.to);
      return { x: 120 + f * 880, t: Math.round(from + f * (to - from)) };
    }
    document.addEventListener("mousedown", function (e) {
      var svg = e.target.closest && e.target.closest("svg.timeline");
      if (!svg || e.button !== 0) return;
      e.preventDefault();
      start = { svg: svg, p: at(svg, e.clientX) };
      band = document.createElementNS("http://www.w3.org/2000/svg", "rect");
      band.setAttribute("class", "band");
      band.setAttribute("y", "0");
      band.setAttribute("height", svg.viewBox.baseVal.height);
      band.setAttribute("x", start.p.x);
      band.setAttribute("width", "0");
      svg.appendChild(band);
    });
    document.addEventListener("mousemove", function (e) {
      if (!start) return;
      var p = at(start.svg, e.clientX);
      band.setAttribute("x", Math.min(p.x, start.p.x));
      band.setAttribute("width", Math.abs(p.x - start.p.x));
    });
    document.addEventListener("mouseup", function (e) {
      if (!start) return;
      var p = at(start.svg, e.clientX), a = start.p;
      start = null;
      if (Math.abs(p.x - a.x) < 4) { band.remove(); return; }
      var chain = new URLSearchParams(location.search).get("chain");
      location.search = "from=" + Math.min(a.t, p.t) + "&to=" + Math.max(a.t, p.t) +
        (chain ? "&chain=" + encodeURIComponent(chain) : "");
    });
  }

  follow();
  charts();
  zoom();
})();
