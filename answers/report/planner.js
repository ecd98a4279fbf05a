/* gpucost serve: the "Plan a job" view. The form's controls are drawn by the server from
 * `gpucost estimate`'s own options; this file sends the ones that differ from their defaults to
 * /api/estimate, keeps them in the address bar ("job.<field>" keys) so a link reopens the same job
 * and answer, and draws the answer: memory by component, the ranking with its bill item by item,
 * and why the other offers were left out. It computes nothing itself. */
(function () {
  "use strict";

  var form = document.getElementById("plan-form");
  if (!form) return;
  var PLANNER = JSON.parse(document.getElementById("gpucost-planner").textContent);
  var PREFIX = "job.";
  // a URL longer than this goes as a POST body instead (the address bar keeps it either way)
  var MAX_GET = 6000;
  var errorsBox = document.getElementById("plan-errors");
  var answer = document.getElementById("plan-answer");
  var result = document.getElementById("plan-result");
  var ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  function esc(value) {
    return String(value === null || value === undefined ? "" : value).replace(/[&<>"']/g, function (c) {
      return ENTITIES[c];
    });
  }
  function money(x) {
    return x === null || x === undefined ? "?" : "$" + Number(x).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  }
  function num(x, digits) {
    if (x === null || x === undefined) return "";
    return Number(x).toLocaleString("en-US", { maximumFractionDigits: digits === undefined ? 2 : digits });
  }
  function controls() {
    return Array.prototype.slice.call(form.querySelectorAll("[name]"));
  }
  function valueOf(el) {
    if (el.type === "checkbox") return el.checked ? "true" : "false";
    return el.name === "config_json" ? el.value : el.value.trim();
  }
  function setValue(el, value) {
    if (el.type === "checkbox") el.checked = value === "true";
    else el.value = value;
  }
  // the fields that differ from their defaults: what the question is, and what the URL holds
  function fields() {
    var q = new URLSearchParams();
    controls().forEach(function (el) {
      var value = valueOf(el);
      if (value !== el.dataset.default) q.set(el.name, value);
    });
    return q;
  }
  function writeUrl(q) {
    var params = new URLSearchParams(location.search);
    Array.from(params.keys()).forEach(function (key) {
      if (key.indexOf(PREFIX) === 0) params.delete(key);
    });
    q.forEach(function (value, key) { params.set(PREFIX + key, value); });
    var search = params.toString();
    try {
      window.history.replaceState(window.history.state, "", location.pathname + (search ? "?" + search : "") + "#plan");
    } catch (e) {
      // the answer still shows; only the link stays unshared
    }
  }
  function restore() {
    var params = new URLSearchParams(location.search);
    var found = false;
    controls().forEach(function (el) {
      var value = params.get(PREFIX + el.name);
      if (value === null) return;
      setValue(el, value);
      found = true;
    });
    return found;
  }

  function showErrors(detail) {
    controls().forEach(function (el) { el.removeAttribute("aria-invalid"); });
    if (!detail) {
      errorsBox.hidden = true;
      errorsBox.innerHTML = "";
      return;
    }
    var list = Array.isArray(detail) ? detail : [{ message: String(detail) }];
    list.forEach(function (e) {
      var el = e.field ? form.querySelector('[name="' + e.field + '"]') : null;
      if (el) el.setAttribute("aria-invalid", "true");
    });
    errorsBox.innerHTML = "<strong>Not estimated:</strong><ul>" + list.map(function (e) {
      return '<li data-field="' + esc(e.field || "") + '">' + esc(e.message) + "</li>";
    }).join("") + "</ul>";
    errorsBox.hidden = false;
  }

  function facts(rows) {
    document.getElementById("plan-job").innerHTML = rows.filter(function (r) { return r[1] !== null && r[1] !== ""; }).map(function (r) {
      return "<dt>" + esc(r[0]) + "</dt><dd>" + esc(r[1]) + "</dd>";
    }).join("");
  }
  function memoryTable(memory) {
    var body = document.querySelector("#plan-memory tbody");
    body.innerHTML = Object.keys(memory).map(function (key) {
      var label = key.replace(/_gb$/, "").replace(/_/g, " ");
      var strong = label === "total";
      return '<tr data-component="' + esc(key) + '"' + (strong ? ' class="total"' : "") + '><td data-label="component">' + esc(label) +
        '</td><td class="num" data-label="GB">' + num(memory[key]) + "</td></tr>";
    }).join("");
  }

  var ITEMS = PLANNER.bill_items;
  function rankedTable(offers) {
    var table = document.getElementById("plan-table");
    var head = ["#", "offer", "GPUs", "sharding", "GB/GPU", "hours", "price"].concat(ITEMS.map(function (item) {
      return item.replace(/_/g, " ");
    })).concat(["bill total"]);
    table.tHead.rows[0].innerHTML = head.map(function (h, i) {
      return "<th" + (i > 3 && i !== 6 ? ' class="num"' : "") + ">" + esc(h) + "</th>";
    }).join("");
    table.tBodies[0].innerHTML = offers.map(function (o, i) {
      var nodes = o.multi_node ? o.nodes_used + "×" + o.gpus_per_node : String(o.gpus_used);
      var source = o.price_source + (o.price_statistic ? " " + o.price_statistic : "") + (o.is_spot ? ", spot" : "");
      var cells = [
        ["#", String(i + 1), "num"],
        ["offer", o.provider + " " + o.instance_type + " (" + o.region + ")", "offer"],
        ["GPUs", nodes + "× " + o.gpu_name, ""],
        ["sharding", o.sharding, ""],
        ["GB/GPU", num(o.total_gb, 1), "num"],
        ["hours", num(o.estimated_hours), "num"],
        ["price", source, ""],
      ].concat(ITEMS.map(function (item) {
        return [item.replace(/_/g, " "), money(o[item + "_usd"]), "num"];
      })).concat([["bill total", money(o.total_usd) + (o.bill_unknown_items ? "*" : ""), "num total"]]);
      return '<tr data-provider="' + esc(o.provider) + '" data-instance="' + esc(o.instance_type) + '" data-region="' + esc(o.region) +
        '" data-total="' + esc(o.total_usd) + '">' + cells.map(function (c) {
          return '<td class="' + c[2] + '" data-label="' + esc(c[0]) + '">' + esc(c[1]) + "</td>";
        }).join("") + "</tr>";
    }).join("");
  }
  function excludedTable(rows, total) {
    document.getElementById("plan-excluded-count").textContent = total
      ? total + " offer(s) passed the filters but are not ranked" + (total > rows.length ? "; the first " + rows.length + " are listed" : "") + "."
      : "Every offer that passed the filters is ranked.";
    document.querySelector("#plan-excluded tbody").innerHTML = rows.map(function (r) {
      return '<tr data-provider="' + esc(r.provider) + '"><td data-label="offer">' + esc(r.provider + " " + r.instance_type + " (" + r.region + ")") +
        '</td><td data-label="GPUs">' + esc(r.gpus_used + "× " + r.gpu_name) + '</td><td class="wrap" data-label="why">' + esc(r.excluded_reason) + "</td></tr>";
    }).join("");
  }

  function draw(data) {
    var lines = [];
    if (data.notice) lines.push(data.notice + ".");
    if (data.warning) lines.push("Warning: " + data.warning + ".");
    var job = [
      ["model", data.model_id],
      ["parameters", num(data.params / 1e9) + "B"],
      ["method", data.method],
      ["training tokens", num(data.train_tokens / 1e6, 1) + "M"],
      ["experiment", data.experiment],
    ];
    document.getElementById("plan-ranked").hidden = data.kind !== "ranking";
    if (data.kind === "stated") {
      var s = data.stated;
      lines.unshift(s.fits
        ? data.model_id + " " + data.method + " fits " + s.nodes + "×" + s.gpus_per_node + " " + s.gpu + " with " + s.sharding +
          (s.hours !== null ? ": " + num(s.hours) + " h" : "") + (s.bill.total_usd !== null ? ", bill " + money(s.bill.total_usd) + " known" : "")
        : data.model_id + " " + data.method + " does not fit " + s.nodes + "×" + s.gpus_per_node + " " + s.gpu + " (try qlora, more GPUs or zero3).");
      job.push(["sharding", s.sharding], ["GPUs", s.n_gpus + "× " + s.gpu], ["usable GB/GPU", num(s.usable_vram_gb, 1)]);
      memoryTable(s.memory_gb);
    } else if (data.why) {
      lines.unshift(data.why + ".");
      document.getElementById("plan-ranked").hidden = true;
      document.querySelector("#plan-memory tbody").innerHTML = "";
    } else {
      var best = data.offers[0];
      lines.unshift(data.model_id + " " + data.method + ": " + data.counts.priced + " priced of " + data.counts.offers +
        " offers; cheapest " + best.provider + " " + best.instance_type + " (" + best.region + "), " + num(best.estimated_hours) +
        " h, bill " + money(best.total_usd) + ".");
      job.push(["sharding", data.memory.sharding + " over " + data.memory.n_gpus + " GPU(s), on the cheapest offer"],
        ["trainable", num(data.memory.trainable_params / 1e6, 1) + "M"]);
      memoryTable(data.memory.memory_gb);
      rankedTable(data.offers);
      excludedTable(data.excluded, data.excluded_total);
    }
    facts(job);
    answer.textContent = lines.join(" ");
    answer.hidden = false;
    result.hidden = false;
  }

  function ask() {
    var q = fields();
    writeUrl(q);
    showErrors(null);
    document.body.dataset.planned = "asking";
    var url = "/api/estimate?" + q.toString();
    var request = url.length <= MAX_GET
      ? fetch(url, { headers: { accept: "application/json" } })
      : fetch("/api/estimate", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify(Object.fromEntries(q)),
      });
    return request.then(function (response) {
      return response.json().then(function (data) { return { status: response.status, data: data }; });
    }).then(function (reply) {
      if (reply.status !== 200) {
        showErrors(reply.data.detail);
        answer.hidden = true;
        result.hidden = true;
      } else {
        draw(reply.data);
      }
      document.body.dataset.planned = String(reply.status);
    }).catch(function (error) {
      showErrors("the server did not answer (" + error + "); is gpucost serve still running?");
      document.body.dataset.planned = "error";
    });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    ask();
  });
  document.getElementById("plan-reset").addEventListener("click", function () {
    controls().forEach(function (el) { setValue(el, el.dataset.default); });
    showErrors(null);
    answer.hidden = true;
    result.hidden = true;
    writeUrl(new URLSearchParams());
  });
  // a shared link: the job it holds, answered as soon as the page opens
  if (restore()) ask();
  else document.body.dataset.planned = "idle";
})();
