// The shareable web page: inline CSS, inline script, the data as escaped JSON.
// The script and style below hold no "//" (no line comments, no addresses): the
// page must never refer to anything outside itself.
#include "core/analysis/web_page.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/io/error.hpp"
#include "core/io/message.hpp"
#include "core/model/memory_cost.hpp"

namespace attnviz {

namespace {

const char* const page_style = R"CSS(
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; background: #fafafa; }
h1 { font-size: 1.4em; margin: 0 0 0.2em; }
.model { color: #555; margin: 0 0 1em; }
section.sentence { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 0.8em 1em; margin: 0 0 1.2em; }
section.sentence h2 { font-size: 1.05em; margin: 0 0 0.5em; }
.line { margin: 0.2em 0; }
.label { display: inline-block; width: 5.5em; color: #666; }
.tok { display: inline-block; padding: 1px 5px; margin: 1px; border-radius: 3px; border: 1px solid #e3e3e3; }
.out .tok { cursor: pointer; }
.tok.active { outline: 2px solid #d9480f; }
.controls { margin: 0.6em 0; }
.maps { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
figure { margin: 0; }
figcaption { font-weight: 600; margin-bottom: 0.3em; }
table.heat { border-collapse: collapse; }
table.heat td, table.heat th { padding: 0; text-align: center; font-weight: normal; }
table.heat th.col { height: 6em; vertical-align: bottom; white-space: nowrap; }
table.heat th.col span { display: inline-block; transform: rotate(-60deg); transform-origin: left bottom; width: 1.6em; }
table.heat th.row { text-align: right; padding-right: 0.4em; white-space: nowrap; cursor: pointer; }
table.heat td.cell { width: 1.9em; height: 1.6em; border: 1px solid #f0f0f0; font-size: 10px; color: transparent; }
table.heat td.cell:hover { color: #000; }
table.heat tr.active th.row { color: #d9480f; font-weight: 600; }
table.heat tr.active td.cell { border-color: #d9480f; }
table.heat td.tau { padding-left: 0.5em; font-size: 11px; color: #555; text-align: left; }
.info { margin-top: 0.6em; min-height: 3.2em; color: #333; }
.info .cand { display: inline-block; margin-right: 0.8em; }
.sunk { color: #b02a37; }
.erasure { margin-top: 0.8em; }
.erasure h3 { font-size: 1em; margin: 0 0 0.2em; }
.erasure .note { color: #555; margin: 0 0 0.4em; }
table.erasure { border-collapse: collapse; }
table.erasure th, table.erasure td { padding: 2px 0.7em; border-bottom: 1px solid #eee; text-align: right; }
table.erasure th.tokcol, table.erasure tbody th { text-align: left; font-weight: normal; }
table.erasure thead th { font-weight: 600; border-bottom: 1px solid #ccc; }
table.erasure tbody tr { cursor: pointer; }
table.erasure td.never { color: #888; }
table.erasure td.best { font-weight: 600; color: #1f61b5; }
table.erasure tr.active th, table.erasure tr.active td { background: #fff0e6; }
table.erasure tfoot th, table.erasure tfoot td { border-top: 1px solid #ccc; border-bottom: none; font-style: italic; }
)CSS";

const char* const page_script = R"JS(
(function () {
  var data = JSON.parse(document.getElementById('attnviz-data').textContent);
  var names = { attention: 'attention', saliency: 'saliency', grad_input: 'gradient \u00d7 input',
                integrated_gradients: 'integrated gradients', occlusion: 'occlusion (leave one out)' };
  var orderNames = { attention: 'attention', grad_input: 'gradient \u00d7 input',
                     integrated_gradients: 'integrated gradients', random: 'random' };
  var kindNames = { cross: 'cross-attention', encoder_self: 'encoder self-attention',
                    decoder_self: 'decoder self-attention' };
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fmt(v, d) { return (v === null || v === undefined) ? 'n/a' : Number(v).toFixed(d); }
  function blue(v) {
    if (v === null || v === undefined) return 'transparent';
    var a = Math.max(0, Math.min(1, v)); return 'rgba(31, 97, 181, ' + a.toFixed(3) + ')';
  }
  function diverging(v, scale) {
    if (!scale || v === null) return 'transparent';
    var a = Math.min(1, Math.abs(v) / scale);
    return v >= 0 ? 'rgba(200, 60, 40, ' + a.toFixed(3) + ')' : 'rgba(40, 110, 200, ' + a.toFixed(3) + ')';
  }
  function rowScale(row) {
    var m = 0;
    row.forEach(function (v) { if (v !== null) m = Math.max(m, Math.abs(v)); });
    return m;
  }
  function heatmap(columns, rowLabels, rows, colour, tauOf) {
    var table = el('table', 'heat');
    var head = el('tr');
    head.appendChild(el('th'));
    columns.forEach(function (tok) { var th = el('th', 'col'); th.appendChild(el('span', '', tok)); head.appendChild(th); });
    table.appendChild(head);
    var trs = [];
    rows.forEach(function (row, t) {
      var tr = el('tr');
      tr.appendChild(el('th', 'row', rowLabels[t]));
      var scale = rowScale(row);
      columns.forEach(function (c, k) {
        var v = k < row.length ? row[k] : null;
        var td = el('td', 'cell', v === null ? '' : fmt(v, 2));
        td.style.background = colour(v, scale);
        tr.appendChild(td);
      });
      if (tauOf) tr.appendChild(el('td', 'tau', tauOf(t)));
      tr.dataset.step = t;
      table.appendChild(tr);
      trs.push(tr);
    });
    return { table: table, rows: trs };
  }
  function stepsRows(s, rowsOf) { return s.steps.map(rowsOf); }
  function stepTokens(s) { return s.steps.map(function (st) { return st.token; }); }
  function mapTitle(kind, layer, head) {
    if (head === 'rollout') return kind + ', rollout through every layer';
    return kind + ', layer ' + layer + ', ' + (head === 'mean' ? 'mean of heads' : 'head ' + head);
  }
  function findKind(s, name) {
    var found = null;
    s.heads.kinds.forEach(function (k) { if (k.kind === name) found = k; });
    return found;
  }
  function hashChoice(index) {
    var want = null;
    (location.hash || '').replace(/^#/, '').split('&').forEach(function (part) {
      var kv = part.split('=');
      if (kv.length === 2 && kv[0] === 's' + (index + 1)) want = kv[1].split(':');
    });
    return want;
  }
  function erasureTable(s, sec) {
    var e = s.erasure;
    if (!e || !e.steps || !e.steps.length) return [];
    var orders = e.orders || [];
    var box = el('div', 'erasure');
    box.appendChild(el('h3', '', 'Erasure: how many source tokens until the decision changes'));
    box.appendChild(el('p', 'note', 'Source positions erased, most important first by each order, until the model\u2019s ' +
                       'choice at the step changes: fewer removals = the order explains the decision better.'));
    var table = el('table', 'erasure');
    var thead = el('thead'), head = el('tr');
    head.appendChild(el('th', 'tokcol', 'step'));
    orders.forEach(function (o) { head.appendChild(el('th', '', orderNames[o] || o)); });
    thead.appendChild(head);
    table.appendChild(thead);
    var body = el('tbody'), trs = [];
    e.steps.forEach(function (st) {
      var tr = el('tr');
      tr.dataset.step = st.step;
      tr.appendChild(el('th', '', st.step + ': ' + st.token));
      var counts = orders.map(function (o) { var n = st.removals ? st.removals[o] : null; return typeof n === 'number' ? n : null; });
      var fewest = null;
      counts.forEach(function (n) { if (n !== null && (fewest === null || n < fewest)) fewest = n; });
      counts.forEach(function (n) {
        var td = el('td', n === null ? 'never' : (n === fewest ? 'best' : ''), n === null ? 'never' : String(n));
        tr.appendChild(td);
      });
      body.appendChild(tr);
      trs.push(tr);
    });
    table.appendChild(body);
    var foot = el('tfoot'), mean = el('tr');
    mean.appendChild(el('th', '', 'mean where flipped'));
    orders.forEach(function (o) {
      var m = e.mean_removals ? e.mean_removals[o] : null, nv = e.never ? e.never[o] : 0;
      var text = (typeof m === 'number' ? m.toFixed(2) : 'never') + (nv && typeof m === 'number' ? ' (' + nv + ' never)' : '');
      mean.appendChild(el('td', '', text));
    });
    foot.appendChild(mean);
    table.appendChild(foot);
    box.appendChild(table);
    sec.appendChild(box);
    return trs;
  }
  function render(s, index) {
    var sec = el('section', 'sentence');
    sec.appendChild(el('h2', '', 'Sentence ' + (index + 1) + (s.input ? ': ' + s.input : '')));
    var srcLine = el('div', 'line'); srcLine.appendChild(el('span', 'label', 'source'));
    var srcToks = s.source.map(function (tok) { var c = el('span', 'tok', tok); srcLine.appendChild(c); return c; });
    var outLine = el('div', 'line out'); outLine.appendChild(el('span', 'label', 'output'));
    var outToks = s.steps.map(function (step) { var c = el('span', 'tok', step.token); outLine.appendChild(c); return c; });
    sec.appendChild(srcLine); sec.appendChild(outLine);
    var methods = s.methods || [];
    var controls = el('div', 'controls');
    var headsView = s.heads && s.heads.kinds && s.heads.kinds.length;
    var kindSel = el('select', 'kind'), layerSel = el('select', 'layer'), headSel = el('select', 'head');
    if (headsView) {
      controls.appendChild(el('span', 'label', 'attention'));
      s.heads.kinds.forEach(function (k) { var o = el('option', '', kindNames[k.kind] || k.kind); o.value = k.kind; kindSel.appendChild(o); });
      [kindSel, layerSel, headSel].forEach(function (e) { controls.appendChild(e); controls.appendChild(document.createTextNode(' ')); });
    }
    var select = el('select', 'method');
    methods.forEach(function (m) { var o = el('option', '', names[m] || m); o.value = m; select.appendChild(o); });
    if (methods.length) { controls.appendChild(el('span', 'label', 'attribution')); controls.appendChild(select); }
    if (headsView || methods.length) sec.appendChild(controls);
    var maps = el('div', 'maps');
    var hasAttention = s.steps.length && s.steps[0].attention.length;
    var f1 = el('figure'), cap1 = el('figcaption');
    f1.appendChild(cap1);
    var att = null, attr = null, attRowsAreSteps = true, attRows = null;
    if (hasAttention || headsView) maps.appendChild(f1);
    var f2 = el('figure');
    var cap = el('figcaption');
    f2.appendChild(cap);
    maps.appendChild(f2);
    sec.appendChild(maps);
    var ig = el('div', 'ig');
    sec.appendChild(ig);
    var info = el('div', 'info');
    sec.appendChild(info);
    var erasureRows = erasureTable(s, sec);
    var current = -1;
    function light(t) {
      current = t;
      [attRowsAreSteps ? att : null, attr].forEach(function (h) { if (h) h.rows.forEach(function (tr, i) { tr.classList.toggle('active', i === t); }); });
      outToks.forEach(function (c, i) { c.classList.toggle('active', i === t); });
      erasureRows.forEach(function (tr) { tr.classList.toggle('active', Number(tr.dataset.step) === t); });
      var step = s.steps[t];
      var weights = attRows && attRowsAreSteps && attRows.cross ? attRows.rows[t] : step.attention;
      srcToks.forEach(function (c, i) { c.style.background = weights && weights.length ? blue(weights[i]) : 'transparent'; });
      info.textContent = '';
      var head = el('div', '', 'step ' + t + ': \u201c' + step.token + '\u201d, log p ' + fmt(step.log_prob, 3) +
                    (step.contrast ? ' (against \u201c' + step.contrast + '\u201d)' : ''));
      if (step.sink_share !== null && step.sink_share !== undefined) {
        var sink = el('span', step.sink_share >= 0.5 ? 'sunk' : '', ' \u00b7 attention on <eos> and punctuation ' +
                      Math.round(100 * step.sink_share) + '%');
        head.appendChild(sink);
      }
      info.appendChild(head);
      if (step.top_k) {
        var cands = el('div');
        cands.appendChild(el('span', 'label', 'top-k'));
        step.top_k.forEach(function (c) { cands.appendChild(el('span', 'cand', c.token + ' ' + (100 * c.prob).toFixed(1) + '%')); });
        info.appendChild(cands);
      }
    }
    function hook(h) {
      if (!h) return;
      h.rows.forEach(function (tr, t) { tr.addEventListener('mouseenter', function () { light(t); }); });
    }
    function showAttention(kind, layer, head) {
      if (att) f1.removeChild(att.table);
      att = null;
      if (!headsView) {
        cap1.textContent = 'attention' + (s.attention_map ? ' (' + s.attention_map + ')' : '');
        attRows = null; attRowsAreSteps = true;
        att = heatmap(s.source, stepTokens(s), stepsRows(s, function (st) { return st.attention; }), blue, null);
      } else {
        var k = findKind(s, kind);
        var rows = head === 'rollout' ? k.rollout : head === 'mean' ? k.layers[layer].mean : k.layers[layer].heads[head];
        cap1.textContent = mapTitle(kind, layer, head);
        f1.dataset.kind = kind; f1.dataset.layer = layer; f1.dataset.head = head;
        attRowsAreSteps = kind !== 'encoder_self';
        attRows = { rows: rows, cross: kind === 'cross' };
        att = heatmap(k.columns, k.rows, rows, blue, null);
      }
      f1.appendChild(att.table);
      if (attRowsAreSteps) hook(att);
      if (current >= 0) light(current);
    }
    function fillLayers() {
      var k = findKind(s, kindSel.value);
      layerSel.textContent = '';
      k.layers.forEach(function (l, i) { var o = el('option', '', 'layer ' + i); o.value = String(i); layerSel.appendChild(o); });
      fillHeads();
    }
    function fillHeads() {
      var k = findKind(s, kindSel.value);
      headSel.textContent = '';
      var l = k.layers[Number(layerSel.value)];
      l.heads.forEach(function (h, i) { var o = el('option', '', 'head ' + i); o.value = String(i); headSel.appendChild(o); });
      var mean = el('option', '', 'mean of heads'); mean.value = 'mean'; headSel.appendChild(mean);
      if (k.rollout) { var r = el('option', '', 'rollout (every layer)'); r.value = 'rollout'; headSel.appendChild(r); }
    }
    function chosen() {
      var h = headSel.value;
      return [kindSel.value, Number(layerSel.value), (h === 'mean' || h === 'rollout') ? h : Number(h)];
    }
    function choose(kind, layer, head) {
      if (!findKind(s, kind)) return false;
      kindSel.value = kind; fillLayers();
      var k = findKind(s, kind);
      if (!(layer >= 0 && layer < k.layers.length)) return false;
      layerSel.value = String(layer); fillHeads();
      var h = String(head);
      if (!Array.prototype.some.call(headSel.options, function (o) { return o.value === h; })) return false;
      headSel.value = h;
      showAttention(kind, layer, head === 'mean' || head === 'rollout' ? head : Number(head));
      return true;
    }
    function showMethod(m) {
      if (attr) f2.removeChild(attr.table);
      ig.textContent = '';
      if (!m) { cap.textContent = ''; attr = null; return; }
      cap.textContent = names[m] || m;
      attr = heatmap(s.source, stepTokens(s), stepsRows(s, function (st) { return st.attributions[m] || []; }), diverging,
                     hasAttention ? function (t) {
                       var a = s.steps[t].agreement[m];
                       return a ? '\u03c4 ' + fmt(a.kendall_tau, 2) + (a.top1 ? ' \u2713' : '') : '';
                     } : null);
      f2.appendChild(attr.table);
      if (m === 'integrated_gradients' && s.ig) {
        ig.textContent = 'integrated gradients: ' + s.ig_steps + ' points' + (s.ig.auto ? ' (chosen per step)' : '') +
          ', adds up to within ' + fmt(100 * s.ig.relative_error, 2) + '%' +
          (s.ig.auto && !s.ig.converged ? ' \u2014 short of the ' + fmt(100 * s.ig.tolerance, 0) + '% asked' +
            (s.ig.work_capped ? ' (more points would pass the work bound)' : '') + ': read with care' : '');
        ig.className = 'ig' + (s.ig.auto && !s.ig.converged ? ' sunk' : '');
      }
      hook(attr);
      if (current >= 0) light(current);
    }
    if (headsView) {
      kindSel.addEventListener('change', function () { fillLayers(); var c = chosen(); showAttention(c[0], c[1], c[2]); });
      layerSel.addEventListener('change', function () { fillHeads(); var c = chosen(); showAttention(c[0], c[1], c[2]); });
      headSel.addEventListener('change', function () { var c = chosen(); showAttention(c[0], c[1], c[2]); });
      var want = hashChoice(index), d = s.heads['default'];
      if (!(want && want.length >= 2 &&
            choose(want[0], want[1] === 'rollout' ? 0 : Number(want[1]), want[1] === 'rollout' ? 'rollout' : want[2])))
        choose(d.kind, d.layer, d.head);
    } else if (hasAttention) {
      showAttention();
    }
    outToks.forEach(function (c, t) { c.addEventListener('mouseenter', function () { light(t); }); });
    erasureRows.forEach(function (tr) {
      var t = Number(tr.dataset.step);
      if (t >= 0 && t < s.steps.length) tr.addEventListener('mouseenter', function () { light(t); });
    });
    select.addEventListener('change', function () { showMethod(select.value); });
    showMethod(methods[0]);
    if (s.steps.length) light(0);
    return sec;
  }
  var root = document.getElementById('sentences');
  data.sentences.forEach(function (s, i) { root.appendChild(render(s, i)); });
})();
)JS";

/// Whether s holds "http" (any case) at i: the page spells the h as an escape there, so that
/// not even a sentence about an address puts one in the file.
bool http_at(const std::string& s, size_t i) {
    static const char* const word = "http";
    for (size_t k = 0; k < 4; ++k)
        if (i + k >= s.size() || std::tolower(static_cast<unsigned char>(s[i + k])) != word[k]) return false;
    return true;
}

std::string escape_html(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (http_at(s, i)) {
            out += c == 'h' ? "&#104;" : "&#72;";
            continue;
        }
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&quot;"; break;
        case '/': out += "&#47;"; break;  // no "//" in the page, whatever the text says
        // nor "src=", "href=", "url(" or "@import": inert in text, but the page holds none of the words
        case '=': out += "&#61;"; break;
        case '(': out += "&#40;"; break;
        case '@': out += "&#64;"; break;
        default: out += c;
        }
    }
    return out;
}

/// JSON inside a script element: nothing in it may close the element or read as an address.
/// (JSON's own words true, false and null hold no "http", so every one found is in a string.)
std::string escape_json_for_script(const std::string& json) {
    std::string out;
    out.reserve(json.size());
    for (size_t i = 0; i < json.size(); ++i) {
        const char c = json[i];
        if (http_at(json, i)) {  // only inside strings too
            out += c == 'h' ? "\\u0068" : "\\u0048";
            continue;
        }
        switch (c) {  // these characters occur only inside JSON strings, where the escapes mean the same
        case '/': out += "\\/"; break;
        case '<': out += "\\u003c"; break;
        case '>': out += "\\u003e"; break;
        case '&': out += "\\u0026"; break;
        case '=': out += "\\u003d"; break;  // as in escape_html: no "src=", "href=", "url(", "@import"
        case '(': out += "\\u0028"; break;
        case '@': out += "\\u0040"; break;
        default: out += c;
        }
    }
    return out;
}

}  // namespace

namespace {

/// Weights as the page shows them: 4 decimals (a cell prints 2), so a page of many heads stays small.
nlohmann::json page_number(float v) {
    if (!std::isfinite(v)) return nullptr;
    return std::round(static_cast<double>(v) * 1e4) / 1e4;
}

nlohmann::json page_matrix(const AttentionMatrix& m) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : m) {
        nlohmann::json r = nlohmann::json::array();
        for (float v : row) r.push_back(page_number(v));
        rows.push_back(std::move(r));
    }
    return rows;
}

/// Labels for n positions: `tokens` where it has them, "#i" past its end.
std::vector<std::string> labels(const std::vector<std::string>& tokens, size_t n) {
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) out.push_back(i < tokens.size() ? tokens[i] : "#" + std::to_string(i));
    return out;
}

/// The size of a kind's maps: its largest layer's rows and the longest row.
std::pair<size_t, size_t> kind_shape(const AttentionRecord& r, AttentionKind kind) {
    size_t rows = 0, cols = 0;
    for (const auto& m : r.maps)
        if (m.id.kind == kind) {
            rows = std::max(rows, m.weights.size());
            for (const auto& row : m.weights) cols = std::max(cols, row.size());
        }
    return {rows, cols};
}

const AttentionKind page_kinds[] = {AttentionKind::cross, AttentionKind::encoder_self, AttentionKind::decoder_self};

/// Whether a record has more than one map to choose from (a multi-head model).
bool has_head_view(const AttentionRecord& r) { return r.maps.size() > 1; }

/// The "heads" entry of a sentence: per kind its labels, every layer's heads and mean, and the
/// rollout of a self-attention kind; "default": the record's primary map.
nlohmann::json heads_json(const SentenceAttribution& a, const AttentionRecord& r) {
    nlohmann::json kinds = nlohmann::json::array();
    for (AttentionKind kind : page_kinds) {
        const int layers = r.layer_count(kind), heads = r.head_count(kind);
        if (layers == 0 || heads == 0) continue;
        const auto [rows, cols] = kind_shape(r, kind);
        std::vector<std::string> row_labels, col_labels;
        if (kind == AttentionKind::encoder_self) {
            row_labels = labels(a.source, rows);
            col_labels = labels(a.source, cols);
        } else {
            row_labels = labels(a.output, rows);
            if (kind == AttentionKind::cross) {
                col_labels = labels(a.source, cols);
            } else {  // the decoder's inputs: the start token, then the outputs before each step
                std::vector<std::string> inputs{"<bos>"};
                inputs.insert(inputs.end(), a.output.begin(), a.output.end());
                col_labels = labels(inputs, cols);
            }
        }
        nlohmann::json layer_list = nlohmann::json::array();
        for (int l = 0; l < layers; ++l) {
            nlohmann::json head_list = nlohmann::json::array();
            for (int h = 0; h < heads; ++h) {
                const AttentionMap* m = r.find(AttentionMapId{kind, l, h});
                head_list.push_back(m ? page_matrix(m->weights) : nlohmann::json::array());
            }
            HeadSelection all;
            all.kind = kind;
            all.layer = l;
            layer_list.push_back({{"heads", std::move(head_list)}, {"mean", page_matrix(r.select(all))}});
        }
        nlohmann::json k{{"kind", to_string(kind)}, {"rows", row_labels}, {"columns", col_labels},
                         {"layers", std::move(layer_list)}};
        k["rollout"] = kind == AttentionKind::cross ? nlohmann::json() : page_matrix(r.rollout(kind));
        kinds.push_back(std::move(k));
    }
    const AttentionMapId d = r.primary().id;
    const nlohmann::json head = d.head < 0 ? nlohmann::json("mean") : nlohmann::json(d.head);
    return {{"kinds", std::move(kinds)}, {"default", {{"kind", to_string(d.kind)}, {"layer", d.layer}, {"head", head}}}};
}

/// "12.3 MiB" for messages.
std::string mebibytes(int64_t bytes) {
    const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", mib);
    return text;
}

}  // namespace

int64_t web_page_cost(const std::vector<SentenceAttribution>& sentences, const std::vector<AttentionRecord>& maps,
                      const std::vector<SentenceErasure>& erasures) {
    // Per number: the JSON value (16 bytes) in its array, its text in the dump (~8), the escaped copy
    // (~8) and the page (~8): 48 bytes is what the page's peak takes per number, rounded up.
    constexpr int64_t per_number = 48;
    int64_t numbers = 0;
    for (const auto& s : sentences) {
        for (const auto& step : s.steps) {
            numbers = bytes_plus(numbers, static_cast<int64_t>(step.attention.size()));
            for (const auto& [m, sc] : step.scores)
                numbers = bytes_plus(numbers, static_cast<int64_t>(sc.source.size() + sc.target.size()));
        }
    }
    for (size_t i = 0; i < maps.size() && i < sentences.size(); ++i) {
        const AttentionRecord& r = maps[i];
        if (!has_head_view(r)) continue;
        for (AttentionKind kind : page_kinds) {
            const auto layers = static_cast<int64_t>(r.layer_count(kind)), heads = static_cast<int64_t>(r.head_count(kind));
            const auto [rows, cols] = kind_shape(r, kind);
            const int64_t matrices = bytes_plus(bytes_times(layers, heads + 1), kind == AttentionKind::cross ? 0 : 1);
            numbers = bytes_plus(numbers, bytes_times(matrices, bytes_times(static_cast<int64_t>(rows), static_cast<int64_t>(cols))));
        }
    }
    // An erasure step: its index, its token (counted a number per 8 bytes, escapes and all) and a
    // removal per order; a sentence: the mean and the never count per order.
    for (const auto& e : erasures) {
        const auto orders = static_cast<int64_t>(e.orders.size());
        numbers = bytes_plus(numbers, bytes_times(orders, 2));
        for (const auto& st : e.steps)
            numbers = bytes_plus(numbers, bytes_plus(static_cast<int64_t>(st.removals.size()) + 2,
                                                     static_cast<int64_t>(st.token.size() / 8)));
    }
    return bytes_times(numbers, per_number);
}

namespace {

/// A sentence's erasure as the page reads it: the orders (the table's columns), per step its
/// index, token and removals per order (null: never), and per order the mean and the steps never
/// flipped. Its source and output are the sentence's own already.
nlohmann::json erasure_json(const SentenceErasure& e) {
    nlohmann::json j = e.to_json();
    j.erase("source");
    j.erase("output");
    nlohmann::json orders = nlohmann::json::array();
    for (auto o : e.orders) orders.push_back(to_string(o));
    j["orders"] = std::move(orders);
    return j;
}

}  // namespace

std::string web_page(const std::vector<SentenceAttribution>& sentences, const WebPageOptions& options,
                     const std::vector<AttentionRecord>& maps, const std::vector<SentenceErasure>& erasures) {
    if (!maps.empty() && maps.size() != sentences.size())
        throw ConfigError("web page: " + std::to_string(maps.size()) + " attention records for " +
                          std::to_string(sentences.size()) + " sentences");
    if (!erasures.empty() && erasures.size() != sentences.size())
        throw ConfigError("web page: " + std::to_string(erasures.size()) + " erasures for " +
                          std::to_string(sentences.size()) + " sentences");
    const int64_t bound = options.memory_bound > 0 ? options.memory_bound : memory_bound();
    const int64_t cost = web_page_cost(sentences, maps, erasures);
    if (cost > bound)
        throw ConfigError("web page: " + count_of(static_cast<int64_t>(sentences.size()), "sentence", "sentences") +
                          " with every head's map would take about " + mebibytes(cost) + " to write, more than the " +
                          mebibytes(bound) + " bound; put fewer or shorter sentences on one page");
    nlohmann::json data{{"title", options.title}, {"model", options.model}, {"sentences", nlohmann::json::array()}};
    if (!options.note.empty()) data["note"] = options.note;
    for (size_t i = 0; i < sentences.size(); ++i) {
        nlohmann::json j = to_json(sentences[i]);
        if (i < maps.size() && has_head_view(maps[i])) j["heads"] = heads_json(sentences[i], maps[i]);
        if (i < erasures.size() && !erasures[i].steps.empty()) j["erasure"] = erasure_json(erasures[i]);
        data["sentences"].push_back(std::move(j));
    }
    std::string page;
    page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    page += "<title>" + escape_html(options.title) + "</title>\n<style>" + page_style + "</style>\n</head>\n<body>\n";
    page += "<h1>" + escape_html(options.title) + "</h1>\n";
    if (!options.model.empty()) page += "<p class=\"model\">" + escape_html(options.model) + "</p>\n";
    if (!options.note.empty()) page += "<p class=\"model note\">" + escape_html(options.note) + "</p>\n";
    page += "<p class=\"model\">Hover an output token or a row: its source weights light up. Attention is blue (0 to 1); "
            "attributions are red where a token raised the output's log-probability and blue where it lowered it, "
            "scaled per row; \u03c4 is Kendall's tau-b between the attention row and |attribution|, \u2713 where both "
            "pick the same top token.</p>\n";
    page += "<div id=\"sentences\"></div>\n";
    page += "<script type=\"application/json\" id=\"attnviz-data\">" + escape_json_for_script(data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) +
            "</script>\n";
    page += "<script>" + std::string(page_script) + "</script>\n</body>\n</html>\n";
    return page;
}

}  // namespace attnviz
