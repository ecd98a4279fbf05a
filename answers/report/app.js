/* gpucost report: renders the four views from the JSON embedded in the page.
 *
 * Sorting is sortable-tablesort's (click a header; `sortSortable` re-applies the current sort after
 * rows are redrawn); charts are uPlot's. This file only filters, groups and formats. */
(function () {
  "use strict";

  var DATA = JSON.parse(document.getElementById("gpucost-data").textContent);
  var NOW = DATA.generated_at;
  document.body.classList.add("js");

  // -- helpers ----------------------------------------------------------------------------------

  function records(table) {
    if (!table) return [];
    return table.rows.map(function (row) {
      var record = {};
      table.columns.forEach(function (column, i) { record[column] = row[i]; });
      return record;
    });
  }
  var ENTITIES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  function esc(value) {
    return String(value === null || value === undefined ? "" : value).replace(/[&<>"']/g, function (c) {
      return ENTITIES[c];
    });
  }
  function usd(x) {
    if (x === null || x === undefined) return "";
    if (x >= 1000) return "$" + Math.round(x).toLocaleString("en-US");
    return "$" + x.toFixed(x < 1 ? 3 : 2);
  }
  function num(x, digits) {
    if (x === null || x === undefined) return "";
    return Number(x).toLocaleString("en-US", { maximumFractionDigits: digits === undefined ? 1 : digits });
  }
  function age(seconds) {
    if (seconds === null || seconds === undefined) return "";
    if (seconds < 3600) return Math.max(0, Math.round(seconds / 60)) + " min";
    if (seconds < 2 * 86400) return Math.round(seconds / 3600) + " h";
    return Math.round(seconds / 86400) + " d";
  }
  function utc(ts) {
    return ts ? new Date(ts * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC" : "";
  }
  function cell(html, sort, cls) {
    return { html: html, sort: sort, cls: cls || "" };
  }
  function td(c) {
    var sort = c.sort === undefined || c.sort === null ? "" : ' data-sort="' + esc(c.sort) + '"';
    return "<td" + (c.cls ? ' class="' + c.cls + '"' : "") + sort + ">" + c.html + "</td>";
  }
  function fillSelect(select, values, label, keep) {
    var current = keep ? select.value : null;
    var fixed = Array.prototype.filter.call(select.options, function (o) { return o.value === ""; });
    select.innerHTML = "";
    fixed.forEach(function (o) { select.appendChild(o); });
    values.forEach(function (v) {
      var option = document.createElement("option");
      option.value = v;
      option.textContent = label ? label(v) : v;
      select.appendChild(option);
    });
    if (current !== null && values.indexOf(current) >= 0) select.value = current;
  }
  function unique(values) {
    return Array.from(new Set(values.filter(function (v) { return v !== null && v !== undefined && v !== ""; })));
  }
  function resort(table) {
    // sortable-tablesort exposes sortSortable(table, altSort): the header's aria-sort is kept
    if (typeof window.sortSortable === "function" && table.tHead.querySelector("th[aria-sort]")) {
      window.sortSortable(table, false);
    }
  }
  function providerName(slug) {
    var p = DATA.providers[slug];
    return p && p.display_name ? p.display_name : slug;
  }
  function providerLink(slug, text) {
    var p = DATA.providers[slug];
    if (!p || !p.url) return esc(text);
    return '<a href="' + esc(p.url) + '" target="_blank" rel="noopener noreferrer">' + esc(text) + "</a>";
  }
  function label(text) {
    return String(text || "").replace(/_/g, " ");
  }

  // -- shareable state --------------------------------------------------------------------------
  // The hash names the view; the query string holds every filter and sort that differs from the
  // page's opening state, so "?gpu=H100-SXM&sort=-vram#compare" opens as its sender saw it. A value
  // the page does not offer (an old link, a typo) is ignored, never an error.

  var PARAMS = new URLSearchParams(location.search);
  var STATE = [];

  function hasOption(select, value) {
    return Array.prototype.some.call(select.options, function (o) { return o.value === value; });
  }
  // `get` reads the control, `set` applies a value from the URL and says whether it was valid; the
  // value read at registration is the default, left out of the URL
  function shared(key, get, set, initial) {
    var entry = { key: key, get: get, initial: initial === undefined ? get() : initial };
    STATE.push(entry);
    var value = PARAMS.get(key);
    if (value !== null) set(value);
    return entry;
  }
  function sharedSelect(key, select, initial) {
    return shared(key, function () { return select.value; }, function (value) {
      if (!hasOption(select, value)) return false;
      select.value = value;
      return true;
    }, initial);
  }
  function sharedCheckbox(key, box) {
    return shared(key, function () { return box.checked ? "1" : "0"; }, function (value) {
      if (value !== "1" && value !== "0") return false;
      box.checked = value === "1";
      return true;
    });
  }
  var stateReady = false; // until every view has read its part of the URL, none may rewrite it
  function writeState() {
    if (!stateReady) return;
    var query = new URLSearchParams();
    // the served page's job form (planner.js) keeps its own "job." keys
    new URLSearchParams(location.search).forEach(function (value, key) {
      if (key.indexOf("job.") === 0) query.set(key, value);
    });
    STATE.forEach(function (entry) {
      var value = entry.get();
      if (value !== entry.initial) query.set(entry.key, value);
    });
    var search = query.toString();
    try {
      // replaceState: a changed filter is not a page to go back to
      window.history.replaceState(window.history.state, "", location.pathname + (search ? "?" + search : "") + location.hash);
    } catch (e) {
      // a browser that refuses it on file:// still shows the page; only the link stays unshared
    }
  }

  // a table's sort as "key" (ascending) or "-key" (descending), "" when unsorted
  function sortOf(table) {
    var th = table.tHead.querySelector("th[aria-sort]");
    if (!th) return "";
    return (th.getAttribute("aria-sort") === "descending" ? "-" : "") + th.dataset.key;
  }
  function setSort(table, value) {
    var key = value.replace(/^-/, "");
    var target = Array.prototype.find.call(table.tHead.rows[0].cells, function (th) {
      return th.dataset.key === key && !th.classList.contains("no-sort");
    });
    if (!target) return false;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) { th.removeAttribute("aria-sort"); });
    target.setAttribute("aria-sort", value.charAt(0) === "-" ? "descending" : "ascending");
    return true;
  }
  function sharedSort(key, table) {
    var entry = shared(key, function () { return sortOf(table); }, function (value) { return setSort(table, value); });
    // sortable-tablesort announces every finished sort, by a click or by a redraw
    table.addEventListener("sort-end", writeState);
    return entry;
  }

  // -- views ------------------------------------------------------------------------------------

  var VIEWS = ["compare", "fit", "history", "freshness"];
  // `gpucost serve`'s page has a job form, the view it opens on
  var PLANNED = !!document.getElementById("view-plan");
  if (PLANNED) VIEWS.unshift("plan");
  var rendered = {};
  function showView() {
    var name = (location.hash || "").replace("#", "");
    if (VIEWS.indexOf(name) < 0) name = PLANNED ? "plan" : "compare";
    VIEWS.forEach(function (view) {
      // sections are "view-<name>": no element has the hash as its id, so a tab never scrolls
      document.getElementById("view-" + view).classList.toggle("active", view === name);
    });
    document.querySelectorAll("nav.tabs a").forEach(function (a) {
      if (a.dataset.view === name) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    });
    document.body.dataset.view = name;
    // charts measure their container, so they are drawn once it is visible
    if (name === "history" && !rendered.history) renderHistory();
  }

  // -- comparison -------------------------------------------------------------------------------

  var offers = records(DATA.offers);
  var gpuSpecs = {};
  records(DATA.gpus).forEach(function (g) { gpuSpecs[g.gpu_name] = g; });
  var compareTable = document.getElementById("compare-table");
  var compareKeys = Array.prototype.map.call(compareTable.tHead.rows[0].cells, function (th) {
    return th.dataset.key;
  });
  var optional = {};
  var compareLabels = {};
  Array.prototype.forEach.call(compareTable.tHead.rows[0].cells, function (th) {
    optional[th.dataset.key] = th.classList.contains("opt");
    compareLabels[th.dataset.key] = th.textContent.trim();
  });
  var filters = {
    gpu: document.getElementById("f-gpu"),
    provider: document.getElementById("f-provider"),
    region: document.getElementById("f-region"),
    vram: document.getElementById("f-vram"),
    spot: document.getElementById("f-spot"),
    interconnect: document.getElementById("f-interconnect"),
    allColumns: document.getElementById("f-all-columns"),
    sort: document.getElementById("f-sort"),
  };

  var COMPARE_CELLS = {
    gpu: function (o) { return cell(esc(o.gpu_name)); },
    provider: function (o) { return cell(esc(providerName(o.provider)), providerName(o.provider)); },
    pricing: function (o) {
      return o.is_spot ? cell('<span class="tag spot">spot</span>', "spot") : cell("on-demand", "on-demand");
    },
    gpu_hour: function (o) {
      var text = (o.price_is_from ? "from " : "") + usd(o.price_usd_per_gpu_hour);
      // a GPU-only price (CPU, RAM, disk billed on top) is not a whole instance's: say so
      if (o.price_covers === "gpu") text += ' <abbr title="GPU only: CPU, RAM and disk are billed on top">†</abbr>';
      if (o.available === false) text += ' <abbr title="the provider marks it unavailable now">✗</abbr>';
      return cell('<span class="price">' + text + "</span>", o.price_usd_per_gpu_hour, "num");
    },
    instance_hour: function (o) {
      return cell(usd(o.price_usd_per_hour) + (o.currency && o.currency !== "USD" ? " <small>(" + esc(o.currency) + ")</small>" : ""),
        o.price_usd_per_hour, "num");
    },
    gpus: function (o) { return cell(num(o.gpu_count, 3), o.gpu_count, "num"); },
    vram: function (o) { return cell(num(o.vram_gb) + " GB", o.vram_gb, "num"); },
    total_vram: function (o) { return cell(num(o.total_vram_gb) + " GB", o.total_vram_gb, "num"); },
    memory: function (o, s) { return cell(esc(s.memory_type || "")); },
    bandwidth: function (o, s) {
      return cell(s.memory_bandwidth_gbps ? num(s.memory_bandwidth_gbps, 0) : "", s.memory_bandwidth_gbps, "num");
    },
    bf16: function (o, s) {
      if (s.supports_bf16 === false) return cell("no", -1, "num");
      return cell(s.bf16_tflops ? num(s.bf16_tflops, 0) : "", s.bf16_tflops, "num");
    },
    fp8: function (o, s) {
      if (!s.supports_fp8) return cell("no", -1, "num");
      return cell(s.fp8_tflops ? num(s.fp8_tflops, 0) : "yes", s.fp8_tflops, "num");
    },
    interconnect: function (o) {
      var text = o.intra_node_interconnect || "";
      if (o.intra_node_gbps) text += " " + num(o.intra_node_gbps, 0) + " GB/s";
      return cell(esc(text), text);
    },
    fabric: function (o) {
      var text = o.inter_node_fabric || "";
      if (o.inter_node_gbps) text += " " + num(o.inter_node_gbps, 0) + " Gb/s";
      return cell(esc(text), text);
    },
    billing: function (o) {
      var text = label(o.billing_granularity);
      if (o.minimum_charge_seconds) text += " (min " + age(o.minimum_charge_seconds) + ")";
      // a month, a monthly cap, a set-up fee or serverless, in words (answers/billing.py)
      if (o.billing_rule) text = o.billing_rule;
      return cell(esc(text), text);
    },
    storage: function (o, s, p) {
      return cell('<span title="' + esc(p.persistent_storage) + '">' + esc(p.persistent_storage) + "</span>",
        p.persistent_storage, "clip");
    },
    access: function (o, s, p) {
      var parts = [];
      if (p.ssh_access) parts.push("SSH");
      if (p.docker_image) parts.push("Docker");
      if (p.jupyter) parts.push("Jupyter");
      return cell(parts.length ? parts.join(" · ") : "—", parts.length);
    },
    multinode: function (o, s, p) {
      return cell('<span title="' + esc(p.multi_node_networking) + '">' + esc(p.multi_node_networking) + "</span>",
        p.multi_node_networking, "clip");
    },
    source: function (o) {
      var text = o.price_source + (o.price_statistic ? " (" + o.price_statistic + ")" : "");
      return cell('<span class="tag ' + esc(o.price_source) + '">' + esc(text) + "</span>", text);
    },
    age: function (o) {
      var seconds = NOW - o.last_seen_at;
      var title = "last seen " + utc(o.last_seen_at) + "; this price since " + utc(o.price_since);
      return cell('<span title="' + esc(title) + '">' + age(seconds) + "</span>", seconds, "num");
    },
    where: function (o, s, p, g) {
      var more = g.regions > 1 ? ' <small>+' + (g.regions - 1) + " regions</small>" : "";
      return cell(esc(o.instance_type) + " · " + esc(o.region || "") + more, o.instance_type);
    },
    offers: function (o, s, p, g) { return cell(String(g.offers), g.offers, "num"); },
    link: function (o) { return cell(providerLink(o.provider, "page"), o.provider); },
  };

  function cheaper(a, b) {
    if (a.price_usd_per_gpu_hour !== b.price_usd_per_gpu_hour) return a.price_usd_per_gpu_hour < b.price_usd_per_gpu_hour;
    if (a.price_usd_per_hour !== b.price_usd_per_hour) return a.price_usd_per_hour < b.price_usd_per_hour;
    return String(a.region) < String(b.region);
  }

  function passes(o, f) {
    if (f.gpu && o.gpu_name !== f.gpu) return false;
    if (f.provider && o.provider !== f.provider) return false;
    if (f.region && o.region !== f.region) return false;
    if (f.vram && !(o.vram_gb >= f.vram)) return false;
    if (f.spot === "spot" && !o.is_spot) return false;
    if (f.spot === "on_demand" && o.is_spot) return false;
    if (f.interconnect) {
      var parts = f.interconnect.split(":");
      var value = parts.slice(1).join(":");
      if (parts[0] === "intra" && o.intra_node_interconnect !== value) return false;
      if (parts[0] === "fabric" && o.inter_node_fabric !== value) return false;
    }
    return true;
  }

  function renderCompare() {
    var f = {
      gpu: filters.gpu.value,
      provider: filters.provider.value,
      region: filters.region.value,
      vram: Number(filters.vram.value) || 0,
      spot: filters.spot.value,
      interconnect: filters.interconnect.value,
    };
    var groups = new Map();
    var matched = 0;
    offers.forEach(function (o) {
      if (!passes(o, f)) return;
      matched += o.offers;
      var key = o.gpu_name + "|" + o.provider + "|" + o.is_spot;
      var group = groups.get(key);
      if (!group) groups.set(key, { best: o, offers: o.offers, regions: 1 });
      else {
        group.offers += o.offers;
        group.regions += 1;
        if (cheaper(o, group.best)) group.best = o;
      }
    });
    var html = [];
    groups.forEach(function (g) {
      var o = g.best;
      var s = gpuSpecs[o.gpu_name] || {};
      var p = DATA.providers[o.provider] || {};
      var cells = compareKeys.map(function (key) {
        var c = COMPARE_CELLS[key](o, s, p, g);
        if (optional[key]) c.cls = (c.cls + " opt").trim();
        // on a phone each row is a card, and a cell names itself
        return td(c).replace("<td", '<td data-key="' + key + '" data-label="' + esc(compareLabels[key]) + '"');
      });
      html.push('<tr data-gpu="' + esc(o.gpu_name) + '" data-provider="' + esc(o.provider) +
        '" data-spot="' + (o.is_spot ? "spot" : "on_demand") + '" data-region="' + esc(o.region || "") +
        '" data-price="' + o.price_usd_per_gpu_hour + '">' + cells.join("") + "</tr>");
    });
    compareTable.tBodies[0].innerHTML = html.join("");
    resort(compareTable);
    var total = offers.reduce(function (n, o) { return n + o.offers; }, 0);
    var count = document.getElementById("compare-count");
    count.classList.toggle("empty", !groups.size);
    if (!offers.length) count.textContent = "No offers to compare: " + (DATA.why_empty || "the warehouse holds none.");
    else if (!groups.size) {
      count.textContent = "None of the " + total + " current offers passes these filters: " + activeFilters().join(", ") +
        ". Loosen one, or Reset.";
    } else {
      count.textContent = groups.size + " rows: the cheapest of " + matched + " matching offers (of " + total + " current offers)";
    }
  }

  function activeFilters() {
    return ["gpu", "provider", "region", "vram", "spot", "interconnect"].filter(function (name) {
      var select = filters[name];
      return select.value && select.value !== "0";
    }).map(function (name) {
      var select = filters[name];
      return select.closest("label").firstChild.textContent.trim() + " " + select.options[select.selectedIndex].textContent;
    });
  }

  function initCompare() {
    fillSelect(filters.gpu, unique(offers.map(function (o) { return o.gpu_name; })).sort());
    fillSelect(filters.provider, unique(offers.map(function (o) { return o.provider; })).sort(), providerName);
    fillSelect(filters.region, unique(offers.map(function (o) { return o.region; })).sort());
    var intra = unique(offers.map(function (o) { return o.intra_node_interconnect; })).sort();
    var fabric = unique(offers.map(function (o) { return o.inter_node_fabric; })).sort();
    fillSelect(filters.interconnect,
      intra.map(function (v) { return "intra:" + v; }).concat(fabric.map(function (v) { return "fabric:" + v; })),
      function (v) {
        var parts = v.split(":");
        return (parts[0] === "intra" ? "in node: " : "between nodes: ") + parts.slice(1).join(":");
      });
    filters.allColumns.checked = window.innerWidth >= 1100;
    // the sort picker, for phones, where the rows are cards without a header to click
    Array.prototype.forEach.call(compareTable.tHead.rows[0].cells, function (th) {
      if (th.classList.contains("no-sort")) return;
      [["", " ↑"], ["-", " ↓"]].forEach(function (way) {
        var option = document.createElement("option");
        option.value = way[0] + th.dataset.key;
        option.textContent = compareLabels[th.dataset.key] + way[1];
        option.defaultSelected = option.value === sortOf(compareTable);
        filters.sort.appendChild(option);
      });
    });
    filters.sort.value = sortOf(compareTable);
    // a header click sorts too: the picker follows it
    compareTable.addEventListener("sort-end", function () {
      if (hasOption(filters.sort, sortOf(compareTable))) filters.sort.value = sortOf(compareTable);
    });
    ["gpu", "provider", "region", "vram", "spot", "interconnect"].forEach(function (name) {
      sharedSelect(name, filters[name]);
    });
    sharedCheckbox("columns", filters.allColumns);
    sharedSort("sort", compareTable);
    var form = document.getElementById("compare-filters");
    function columns() { compareTable.classList.toggle("essentials", !filters.allColumns.checked); }
    form.addEventListener("change", function (event) {
      if (event.target === filters.allColumns) columns();
      else if (event.target === filters.sort) {
        setSort(compareTable, filters.sort.value);
        resort(compareTable);
      } else renderCompare();
      writeState();
    });
    form.addEventListener("reset", function () {
      // the form's values change after the reset event
      setTimeout(function () {
        setSort(compareTable, filters.sort.value);
        columns();
        renderCompare();
        writeState();
      }, 0);
    });
    columns();
    renderCompare();
  }

  // -- will my job fit --------------------------------------------------------------------------

  var fit = DATA.fit || {};
  var jobs = records(fit.jobs);
  // memory and runs refer to jobs (and runs to offers) by index: each is sent once
  var memoryByJob = {};
  records(fit.memory).forEach(function (m) {
    var id = jobs[m.job].job_id;
    (memoryByJob[id] = memoryByJob[id] || []).push(m);
  });
  var fitOffers = records(fit.offers);
  var offersByJob = {};
  records(fit.runs).forEach(function (run) {
    var o = Object.assign({}, fitOffers[run.offer], run);
    o.cost_usd = o.pricing_type === "spot" ? o.expected_spot_cost_usd : o.on_demand_cost_usd;
    var id = jobs[run.job].job_id;
    (offersByJob[id] = offersByJob[id] || []).push(o);
  });
  var fitForm = {
    model: document.getElementById("fit-model"),
    method: document.getElementById("fit-method"),
    seq: document.getElementById("fit-seq"),
    pricing: document.getElementById("fit-pricing"),
  };
  var fitTable = document.getElementById("fit-table");
  var COMPONENTS = [
    ["weights_gb", "weights", "#4e79a7"],
    ["gradients_gb", "gradients", "#f28e2b"],
    ["optimizer_gb", "optimizer", "#e15759"],
    ["activations_gb", "activations", "#76b7b2"],
    ["logits_gb", "logits", "#59a14f"],
    ["overhead_gb", "overhead", "#b07aa1"],
  ];

  function billions(n) {
    if (!n) return "";
    return n >= 1e9 ? num(n / 1e9, 1) + "B" : num(n / 1e6, 1) + "M";
  }

  function currentJob() {
    return jobs.find(function (j) {
      return j.model_id === fitForm.model.value && j.method === fitForm.method.value &&
        String(j.seq_len) === fitForm.seq.value;
    });
  }

  function refreshSeqOptions() {
    var lengths = unique(jobs.filter(function (j) {
      return j.model_id === fitForm.model.value && j.method === fitForm.method.value;
    }).map(function (j) { return String(j.seq_len); })).sort(function (a, b) { return a - b; });
    fillSelect(fitForm.seq, lengths, function (v) { return num(Number(v), 0) + " tokens"; }, true);
  }

  function offerName(o) {
    return providerName(o.provider) + " · " + o.instance_type + (o.region && o.region !== "global" ? " · " + o.region : "");
  }

  function describeBest(o) {
    var cost = o.pricing_type === "spot" ? o.expected_spot_cost_usd : o.on_demand_cost_usd;
    return "<strong>" + esc(offerName(o)) + "</strong> (" + o.gpus_used + "× " + esc(o.gpu_name) +
      (o.nodes_used > 1 ? ", " + o.nodes_used + " nodes" : "") + "): about <strong>" + usd(cost) + "</strong>" +
      (o.pricing_type === "spot" ? " expected" : "") + ", " + num(o.estimated_hours, 2) + " h";
  }

  function renderFit() {
    var job = currentJob();
    var answer = document.getElementById("fit-answer");
    var tbody = fitTable.tBodies[0];
    if (!job) {
      answer.textContent = "This model, method and sequence length are not in the job grid (warehouse/seeds/finetune_jobs.csv).";
      document.getElementById("fit-bar").innerHTML = "";
      document.getElementById("fit-memory").tHead.innerHTML = "";
      document.getElementById("fit-memory").tBodies[0].innerHTML = "";
      document.getElementById("fit-job").innerHTML = "";
      tbody.innerHTML = "";
      return;
    }
    var configs = (memoryByJob[job.job_id] || []).slice().sort(function (a, b) {
      return a.n_gpus - b.n_gpus || String(a.sharding).localeCompare(String(b.sharding));
    });
    var single = configs.find(function (m) { return m.n_gpus === 1 && m.sharding === "none"; }) || configs[0];
    // the breakdown: one GPU unsharded first, then up to three configurations the offers use
    var shown = [single].concat(configs.filter(function (m) { return m !== single; }).slice(0, 3));
    var bar = COMPONENTS.map(function (c) {
      var share = single && single.total_gb ? (100 * (single[c[0]] || 0)) / single.total_gb : 0;
      return '<span style="width:' + share.toFixed(2) + "%;background:" + c[2] + '" title="' + c[1] + " " +
        num(single[c[0]], 2) + ' GB"></span>';
    });
    var barElement = document.getElementById("fit-bar");
    barElement.innerHTML = bar.join("");
    barElement.setAttribute("aria-label", "memory on one GPU: " + COMPONENTS.map(function (c) {
      return c[1] + " " + num(single[c[0]], 1) + " GB";
    }).join(", "));
    var memoryTable = document.getElementById("fit-memory");
    memoryTable.tHead.innerHTML = "<tr><th>GB per GPU</th>" + shown.map(function (m) {
      return '<th class="num">' + m.n_gpus + " GPU" + (m.n_gpus > 1 ? "s" : "") +
        (m.sharding !== "none" ? ", " + esc(m.sharding) : "") + "</th>";
    }).join("") + "</tr>";
    memoryTable.tBodies[0].innerHTML = COMPONENTS.map(function (c) {
      return '<tr><td><span class="swatch" style="background:' + c[2] + '"></span>' + c[1] + "</td>" +
        shown.map(function (m) { return '<td class="num">' + num(m[c[0]], 2) + "</td>"; }).join("") + "</tr>";
    }).join("") + '<tr class="total"><td><strong>total</strong></td>' + shown.map(function (m) {
      return '<td class="num" data-total="' + m.total_gb + '"><strong>' + num(m.total_gb, 2) + "</strong></td>";
    }).join("") + "</tr>";

    var facts = [
      ["model", job.model_id + (job.params ? " (" + billions(job.params) + " parameters)" : "")],
      ["method", job.method + (job.quant ? ", base in " + job.quant : "") + (job.method !== "full" ? ", rank " + job.lora_rank : "")],
      ["trainable", billions(job.trainable_params) + " parameters"],
      ["precision", job.precision + ", " + job.optimizer],
      ["batch", num(job.seq_len, 0) + " tokens × micro-batch " + job.micro_batch],
      ["training", billions(job.train_tokens).replace("B", " billion").replace("M", " million") + " tokens (" +
        billions(job.dataset_tokens) + " × " + job.epochs + " epoch" + (job.epochs > 1 ? "s" : "") + ")"],
      ["peak", single ? num(single.total_gb, 1) + " GB on one GPU, set by the " + single.peak_phase + " phase" : ""],
    ];
    document.getElementById("fit-job").innerHTML = facts.map(function (f) {
      return "<dt>" + esc(f[0]) + "</dt><dd>" + esc(f[1]) + "</dd>";
    }).join("");

    var pricing = fitForm.pricing.value;
    var rows = (offersByJob[job.job_id] || []).filter(function (o) { return !pricing || o.pricing_type === pricing; });
    rows.sort(function (a, b) { return a.cost_usd - b.cost_usd; });
    var spot = rows.find(function (o) { return o.pricing_type === "spot"; });
    var onDemand = rows.find(function (o) { return o.pricing_type === "on_demand"; });
    var lines = [];
    if (spot) lines.push("Cheapest on spot: " + describeBest(spot) + ".");
    if (onDemand) lines.push("Cheapest on-demand: " + describeBest(onDemand) + ".");
    if (!rows.length) {
      lines.push("No current " + (pricing ? label(pricing) + " " : "") + "offer can run this job: it needs " +
        num(single ? single.total_gb : null, 1) + " GB on one GPU, and no offer holds it even sharded.");
    }
    answer.innerHTML = lines.join("<br>");
    tbody.innerHTML = rows.map(function (o, i) {
      var warnings = [];
      if (o.fabric_warning) warnings.push(o.fabric_warning);
      if (o.pricing_type === "spot" && o.interruptions_per_hour) {
        warnings.push("~" + num(o.interruptions_per_hour, 3) + " interruptions/h");
      }
      return '<tr data-pricing="' + o.pricing_type + '" data-cost="' + o.cost_usd + '">' + [
        cell(String(i + 1), i + 1, "num"),
        cell(providerLink(o.provider, offerName(o)), offerName(o)),
        cell((o.pricing_type === "spot" ? '<span class="tag spot">spot</span>' : "on-demand") +
          ' <span class="tag ' + esc(o.price_source) + '">' + esc(o.price_source) + "</span>", o.pricing_type),
        cell(o.gpus_used + "× " + esc(o.gpu_name) + (o.nodes_used > 1 ? " · " + o.nodes_used + " nodes" : ""), o.gpus_used, "num"),
        cell(esc(o.sharding), o.sharding),
        cell(num(o.total_gb, 1) + " / " + num(o.usable_vram_gb, 1), o.total_gb, "num"),
        cell('<span title="billed ' + num(o.billed_hours, 2) + ' h">' + num(o.estimated_hours, 2) + "</span>", o.estimated_hours, "num"),
        cell(usd(o.on_demand_cost_usd), o.on_demand_cost_usd, "num"),
        cell(usd(o.expected_spot_cost_usd), o.expected_spot_cost_usd, "num"),
        cell(usd(o.usd_per_million_tokens), o.usd_per_million_tokens, "num"),
        cell('<span title="' + esc(o.bill_unknown_items ? "unpublished: " + o.bill_unknown_items : "complete") + '">' +
          usd(o.total_usd) + (o.bill_unknown_items ? "*" : "") + "</span>", o.total_usd, "num"),
        cell('<span class="warn">' + esc(warnings.join("; ")) + "</span>"),
      ].map(td).join("") + "</tr>";
    }).join("");
    resort(fitTable);
  }

  function initFit() {
    if (!jobs.length) {
      document.getElementById("fit-answer").textContent = "No fine-tuning marts yet: run `gpucost refresh`.";
      return;
    }
    var params = {};
    jobs.forEach(function (j) { params[j.model_id] = j.params || 0; });
    var models = unique(jobs.map(function (j) { return j.model_id; })).sort(function (a, b) {
      return params[a] - params[b] || a.localeCompare(b);
    });
    // "Llama-3.1-70B (70.6B) · meta-llama": the name first, so a narrow select still shows it
    fillSelect(fitForm.model, models, function (m) {
      var parts = m.split("/");
      var name = parts.pop() + (params[m] ? " (" + billions(params[m]) + ")" : "");
      return parts.length ? name + " · " + parts.join("/") : name;
    });
    var start = jobs.find(function (j) { return j.job_id === fit.default_job; }) || jobs[0];
    fitForm.model.value = start.model_id;
    fitForm.method.value = start.method;
    refreshSeqOptions();
    fitForm.seq.value = String(start.seq_len);
    // the sequence lengths on offer depend on the model and method: restore those first
    sharedSelect("model", fitForm.model);
    sharedSelect("method", fitForm.method);
    refreshSeqOptions();
    // its default is the opening job's, whatever model and method the URL chose
    sharedSelect("seq", fitForm.seq, String(start.seq_len));
    sharedSelect("fit_pricing", fitForm.pricing);
    sharedSort("fit_sort", fitTable);
    document.getElementById("fit-form").addEventListener("change", function (event) {
      if (event.target === fitForm.model || event.target === fitForm.method) refreshSeqOptions();
      renderFit();
      writeState();
    });
    renderFit();
  }

  // -- price history ----------------------------------------------------------------------------

  var history = (DATA.history && DATA.history.series) || [];
  // Tableau 10's first eight (Maureen Stone, Tableau 10 release, 2016): hues told apart on white,
  // colour-blind included; a chart draws at most that many lines unless asked for all of them
  var PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f"];
  var TOP_SERIES = PALETTE.length;
  // past the palette, a line differs from its same-coloured one by its dashes, and its legend
  // swatch by the CSS border style nearest that pattern: 8 colours x 5 patterns tell 40 lines apart
  var DASHES = [[], [8, 4], [2, 3], [12, 3, 2, 3], [12, 3, 2, 3, 2, 3]];
  var DASH_STYLES = ["solid", "dashed", "dotted", "double", "groove"];
  var charts = [];
  var historySelect = document.getElementById("history-gpu");
  var historyAll = document.getElementById("history-all");

  function stepValue(points, x) {
    // the step function's value at x: the last point at or before x (null before the first and in gaps)
    var value = null;
    for (var i = 0; i < points.length && points[i][0] <= x; i++) value = points[i][1];
    return value;
  }

  // relevance: series with a price now first, cheapest first; then the closed ones, latest first
  function byRelevance(a, b) {
    var lastA = a.points[a.points.length - 1];
    var lastB = b.points[b.points.length - 1];
    var nowA = lastA[1] !== null;
    var nowB = lastB[1] !== null;
    if (nowA !== nowB) return nowA ? -1 : 1;
    var order = nowA ? lastA[1] - lastB[1] : lastB[0] - lastA[0];
    return order || providerName(a.provider).localeCompare(providerName(b.provider));
  }

  // a hover tooltip: the line nearest the cursor, its provider, price and moment
  function tooltip() {
    var tip;
    return {
      hooks: {
        init: function (u) {
          tip = document.createElement("div");
          tip.className = "chart-tip";
          tip.hidden = true;
          u.over.appendChild(tip);
        },
        setCursor: function (u) {
          var idx = u.cursor.idx;
          var best = null;
          if (idx !== null && idx !== undefined && u.cursor.top >= 0) {
            for (var i = 1; i < u.series.length; i++) {
              var v = u.data[i][idx];
              if (!u.series[i].show || v === null || v === undefined) continue;
              var distance = Math.abs(u.valToPos(v, "y") - u.cursor.top);
              if (!best || distance < best.distance) best = { i: i, value: v, distance: distance };
            }
          }
          tip.hidden = !best;
          if (!best) return;
          tip.innerHTML = "<strong>" + esc(u.series[best.i].label) + "</strong> " + usd(best.value) +
            "/GPU-h<br><small>" + utc(u.data[0][idx]) + "</small>";
          var x = u.valToPos(u.data[0][idx], "x");
          var y = u.valToPos(best.value, "y");
          tip.style.left = Math.max(0, Math.min(x + 10, u.over.clientWidth - tip.offsetWidth)) + "px";
          tip.style.top = Math.max(0, y - tip.offsetHeight - 10) + "px";
        },
      },
    };
  }

  function renderHistory() {
    rendered.history = true;
    charts.forEach(function (c) { c.destroy(); });
    charts = [];
    var gpu = historySelect.value;
    var shownSeries = 0;
    var allSeries = 0;
    ["on_demand", "spot"].forEach(function (pricing) {
      var target = document.getElementById("chart-" + pricing);
      target.innerHTML = "";
      var found = history.filter(function (s) { return s.gpu_name === gpu && s.pricing_type === pricing; });
      found.sort(byRelevance);
      var series = historyAll.checked ? found : found.slice(0, TOP_SERIES);
      target.dataset.series = series.length;
      target.dataset.total = found.length;
      allSeries += found.length;
      if (!series.length) {
        target.innerHTML = '<p class="empty">No ' + label(pricing) + " prices recorded for " + esc(gpu) + ".</p>";
        return;
      }
      shownSeries += series.length;
      var xs = unique([].concat.apply([NOW], series.map(function (s) {
        return s.points.map(function (p) { return p[0]; });
      }))).sort(function (a, b) { return a - b; });
      var data = [xs].concat(series.map(function (s) {
        return xs.map(function (x) { return stepValue(s.points, x); });
      }));
      var opts = {
        width: Math.max(280, target.clientWidth || 560),
        height: 300,
        scales: { x: { time: true } },
        plugins: [tooltip()],
        // the legend's swatch repeats the line's dashes, so two lines of one colour stay told apart
        legend: { markers: { width: 3, dash: function (u, i) {
          return DASH_STYLES[Math.floor((i - 1) / PALETTE.length) % DASHES.length];
        } } },
        series: [{}].concat(series.map(function (s, i) {
          return {
            label: providerName(s.provider),
            stroke: PALETTE[i % PALETTE.length],
            dash: DASHES[Math.floor(i / PALETTE.length) % DASHES.length],
            width: i < TOP_SERIES ? 2 : 1.5,
            paths: uPlot.paths.stepped({ align: 1 }),
            points: { show: xs.length <= 2 },
            value: function (u, v) { return v === null || v === undefined ? "—" : usd(v); },
          };
        })),
        axes: [{}, { label: "$/GPU-hour", size: 60, values: function (u, ticks) {
          return ticks.map(function (v) { return usd(v); });
        } }],
      };
      charts.push(new uPlot(opts, data, target));
    });
    var folded = allSeries - shownSeries;
    document.getElementById("history-all-count").textContent = folded ? "(" + folded + " more)" : "";
    document.getElementById("history-count").textContent = shownSeries
      ? shownSeries + " of " + allSeries + " provider series for " + gpu + (folded
        ? ": the " + TOP_SERIES + " most relevant per chart (cheapest now, then latest seen); tick “all series” for the rest"
        : "") + ". A step is a price change, a gap a time with no current offer; hover for values."
      : "";
  }

  function initHistory() {
    var counts = {};
    history.forEach(function (s) { counts[s.gpu_name] = (counts[s.gpu_name] || 0) + 1; });
    var gpus = Object.keys(counts).sort();
    fillSelect(historySelect, gpus);
    // open on the GPU the most providers price: the richest chart
    var richest = gpus.slice().sort(function (a, b) { return counts[b] - counts[a] || a.localeCompare(b); })[0];
    if (richest) historySelect.value = richest;
    sharedSelect("history_gpu", historySelect);
    sharedCheckbox("history_all", historyAll);
    document.getElementById("history-form").addEventListener("change", function () {
      if (rendered.history) renderHistory();
      writeState();
    });
    var resizing = null;
    window.addEventListener("resize", function () {
      clearTimeout(resizing);
      resizing = setTimeout(function () { if (rendered.history && document.body.dataset.view === "history") renderHistory(); }, 150);
    });
  }

  // -- freshness ----------------------------------------------------------------------------------

  function initFreshness() {
    document.querySelectorAll("#freshness-table td.age").forEach(function (cellElement) {
      var ts = Number(cellElement.dataset.ts);
      if (ts) cellElement.insertAdjacentHTML("beforeend", " <small>(" + age(NOW - ts) + " before this page)</small>");
    });
    var pageAge = Date.now() / 1000 - NOW;
    if (pageAge > 2 * 86400) {
      var stale = document.getElementById("stale-banner");
      stale.textContent = "This page was made " + age(pageAge) + " ago; prices have probably moved since. Run `gpucost report` again.";
      stale.hidden = false;
    }
  }

  initCompare();
  initFit();
  initHistory();
  initFreshness();
  stateReady = true;
  writeState();
  window.addEventListener("hashchange", showView);
  showView();
  document.body.dataset.ready = "true";
  // for benchmarks/report_size.py: when the page became usable, in ms since navigation start
  if (window.performance && performance.mark) performance.mark("gpucost-ready");
})();
