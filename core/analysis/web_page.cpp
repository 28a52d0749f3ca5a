// The shareable web page: inline CSS, inline script, the data as escaped JSON.
// The script and style below hold no "//" (no line comments, no addresses): the
// page must never refer to anything outside itself.
#include "core/analysis/web_page.hpp"

#include <cctype>

#include <nlohmann/json.hpp>

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
)CSS";

const char* const page_script = R"JS(
(function () {
  var data = JSON.parse(document.getElementById('attnviz-data').textContent);
  var names = { attention: 'attention', saliency: 'saliency', grad_input: 'gradient \u00d7 input',
                integrated_gradients: 'integrated gradients', occlusion: 'occlusion (leave one out)' };
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function fmt(v, d) { return (v === null || v === undefined) ? 'n/a' : Number(v).toFixed(d); }
  function blue(v) { var a = Math.max(0, Math.min(1, v)); return 'rgba(31, 97, 181, ' + a.toFixed(3) + ')'; }
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
  function heatmap(s, rowsOf, colour, showTau, method) {
    var table = el('table', 'heat');
    var head = el('tr');
    head.appendChild(el('th'));
    s.source.forEach(function (tok) { var th = el('th', 'col'); th.appendChild(el('span', '', tok)); head.appendChild(th); });
    table.appendChild(head);
    var trs = [];
    s.steps.forEach(function (step, t) {
      var tr = el('tr');
      tr.appendChild(el('th', 'row', step.token));
      var row = rowsOf(step);
      var scale = rowScale(row);
      row.forEach(function (v) {
        var td = el('td', 'cell', fmt(v, 2));
        td.style.background = colour(v, scale);
        tr.appendChild(td);
      });
      if (showTau) {
        var a = step.agreement[method];
        tr.appendChild(el('td', 'tau', a ? '\u03c4 ' + fmt(a.kendall_tau, 2) + (a.top1 ? ' \u2713' : '') : ''));
      }
      tr.dataset.step = t;
      table.appendChild(tr);
      trs.push(tr);
    });
    return { table: table, rows: trs };
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
    var select = el('select');
    methods.forEach(function (m) { var o = el('option', '', names[m] || m); o.value = m; select.appendChild(o); });
    if (methods.length) { controls.appendChild(el('span', 'label', 'attribution')); controls.appendChild(select); sec.appendChild(controls); }
    var maps = el('div', 'maps');
    var hasAttention = s.steps.length && s.steps[0].attention.length;
    var att = null, attr = null;
    if (hasAttention) {
      var f1 = el('figure'); f1.appendChild(el('figcaption', '', 'attention' + (s.attention_map ? ' (' + s.attention_map + ')' : '')));
      att = heatmap(s, function (st) { return st.attention; }, blue, false);
      f1.appendChild(att.table); maps.appendChild(f1);
    }
    var f2 = el('figure');
    var cap = el('figcaption');
    f2.appendChild(cap);
    maps.appendChild(f2);
    sec.appendChild(maps);
    var info = el('div', 'info');
    sec.appendChild(info);
    var current = -1;
    function light(t) {
      current = t;
      [att, attr].forEach(function (h) { if (h) h.rows.forEach(function (tr, i) { tr.classList.toggle('active', i === t); }); });
      outToks.forEach(function (c, i) { c.classList.toggle('active', i === t); });
      var step = s.steps[t];
      srcToks.forEach(function (c, i) { c.style.background = hasAttention ? blue(step.attention[i]) : 'transparent'; });
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
    function showMethod(m) {
      if (attr) f2.removeChild(attr.table);
      if (!m) { cap.textContent = ''; attr = null; return; }
      cap.textContent = names[m] || m;
      attr = heatmap(s, function (st) { return st.attributions[m] || []; }, diverging, hasAttention, m);
      f2.appendChild(attr.table);
      hook(attr);
      if (current >= 0) light(current);
    }
    hook(att);
    outToks.forEach(function (c, t) { c.addEventListener('mouseenter', function () { light(t); }); });
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
        default: out += c;
        }
    }
    return out;
}

}  // namespace

std::string web_page(const std::vector<SentenceAttribution>& sentences, const WebPageOptions& options) {
    nlohmann::json data{{"title", options.title}, {"model", options.model}, {"sentences", nlohmann::json::array()}};
    for (const auto& s : sentences) data["sentences"].push_back(to_json(s));
    std::string page;
    page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
    page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
    page += "<title>" + escape_html(options.title) + "</title>\n<style>" + page_style + "</style>\n</head>\n<body>\n";
    page += "<h1>" + escape_html(options.title) + "</h1>\n";
    if (!options.model.empty()) page += "<p class=\"model\">" + escape_html(options.model) + "</p>\n";
    page += "<p class=\"model\">Hover an output token or a row: its source weights light up. Attention is blue (0 to 1); "
            "attributions are red where a token raised the output's log-probability and blue where it lowered it, "
            "scaled per row; \u03c4 is Kendall's tau-b between the attention row and |attribution|, \u2713 where both "
            "pick the same top token.</p>\n";
    page += "<div id=\"sentences\"></div>\n";
    page += "<script type=\"application/json\" id=\"attnviz-data\">" + escape_json_for_script(data.dump()) +
            "</script>\n";
    page += "<script>" + std::string(page_script) + "</script>\n</body>\n</html>\n";
    return page;
}

}  // namespace attnviz
