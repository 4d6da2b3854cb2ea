// The matrix page's selector: looks the chosen inputs up in the grid that `plan` answered at docs
// build time (selector-data.js, written by tasks/gen_docs.py). No selection logic lives here.
(function () {
  "use strict";
  function esc(text) {
    return String(text).replace(/[&<>"]/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c];
    });
  }
  function show() {
    var grid = window.VERL_SETUP_GRID;
    var box = document.getElementById("answer");
    if (!grid || !box) return;
    var values = grid.inputs.map(function (name) {
      return document.getElementById("sel-" + name).value;
    });
    var cpu = values[grid.inputs.indexOf("driver")] === "none";
    document.getElementById("sel-sm").disabled = cpu;
    if (cpu) values[grid.inputs.indexOf("sm")] = "-";
    var key = values.join("|");
    var pick = {};
    grid.inputs.forEach(function (name, i) { pick[name] = values[i]; });
    // The same flags as tasks/gen_docs.py plan_argv (the browser test compares the two).
    var plan = "verl-setup plan --no-config" +
      (cpu ? " --no-gpu --host docs/assets/cpu-host.json" : " --driver " + pick.driver + " --sm " + pick.sm + " --gpu-count 8") +
      " --arch " + pick.arch + " --glibc " + pick.glibc + " --python " + pick.python +
      (pick.engine === "any" ? "" : " --engine " + pick.engine) + " --backend " + pick.backend;
    var answer = grid.answers[grid.keys[key]];
    box.setAttribute("data-key", key);
    if (!answer) {
      box.setAttribute("data-row", "");
      box.innerHTML = "<p>This combination is not in the grid.</p>";
      return;
    }
    box.setAttribute("data-row", answer.row || "none");
    if (!answer.row) {
      box.innerHTML =
        '<p class="verdict">No row fits (exit 3).</p><pre>' + esc(answer.why) + "</pre>" +
        "<p>Same answer from <code id=\"answer-plan\">" + esc(plan) + "</code></p>";
      return;
    }
    box.innerHTML =
      '<p class="verdict">Row <a id="answer-row" href="#' +
      esc(answer.row.toLowerCase().replace(/[^a-z0-9_-]/g, "")) + '"><code>' + esc(answer.row) +
      "</code></a>, Python " + esc(answer.python) + "</p>" +
      '<p>Install it:</p><pre id="answer-install"><code>' + esc(answer.install) + "</code></pre>" +
      "<p>Why (what <code id=\"answer-plan\">" + esc(plan) + "</code> prints):</p><pre>" + esc(answer.why) + "</pre>";
  }
  function start() {
    var grid = window.VERL_SETUP_GRID;
    if (!grid) return;
    grid.inputs.forEach(function (name) {
      var sel = document.getElementById("sel-" + name);
      if (sel) sel.addEventListener("change", show);
    });
    show();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
