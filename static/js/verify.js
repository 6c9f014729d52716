// Redo the waiting room's draw in the browser (admission/draw.py is the same rule): fetch the
// published JSON, check the seed against the hash committed before the first join, the entry list
// against the hash published at the draw, recompute every entry's key with WebCrypto SHA-256,
// sort, and compare the buyer's place (and the published order) with the result.
(function () {
  "use strict";
  var enc = new TextEncoder();

  function hex(buffer) {
    return Array.from(new Uint8Array(buffer)).map(function (b) { return b.toString(16).padStart(2, "0"); }).join("");
  }
  function sha256(text) { return crypto.subtle.digest("SHA-256", enc.encode(text)); }
  function compare(a, b) {
    var x = new Uint8Array(a.key), y = new Uint8Array(b.key);
    for (var i = 0; i < x.length; i++) { if (x[i] !== y[i]) return x[i] - y[i]; }
    return 0;
  }

  async function recompute(draw) {
    var problems = [], steps = [];
    var entries = draw.entries.slice().sort(function (a, b) { return a - b; });
    if (hex(await sha256(draw.seed)) === draw.seed_sha256) steps.push("The seed matches the hash published before the first join.");
    else problems.push("The seed does not match the hash published before the first join.");
    var listed = hex(await sha256(entries.join(",")));
    if (listed === draw.entries_sha256) steps.push("The list of " + entries.length + " entries matches the hash published at the draw.");
    else problems.push("The list of entries does not match the hash published at the draw.");
    var beacon = draw.beacon || "";
    if (beacon) steps.push("The beacon value " + beacon + " is mixed in.");
    var keyed = await Promise.all(entries.map(async function (entry) {
      return {entry: entry, key: await sha256(draw.seed + ":" + draw.entries_sha256 + ":" + beacon + ":" + entry)};
    }));
    keyed.sort(compare);
    var order = keyed.map(function (k) { return k.entry; });
    if (Array.isArray(draw.order)) {
      if (order.join(",") === draw.order.join(",")) steps.push("Every published place is the place the rule gives.");
      else problems.push("The published places are not the order the rule gives.");
    }
    return {order: order, problems: problems, steps: steps};
  }

  async function check(root, entry, number) {
    var result = document.getElementById("verify-result");
    var list = document.getElementById("verify-steps");
    list.replaceChildren();
    result.className = "notice";
    if (!(window.crypto && crypto.subtle)) { result.textContent = "This browser cannot compute SHA-256 here (it needs https)."; return; }
    var draw = await fetch(root.dataset.drawUrl, {headers: {"Accept": "application/json"}}).then(function (r) { return r.json(); });
    if (!draw.drawn) { result.textContent = "The draw has not run yet: it runs at the start. Seed SHA-256: " + draw.seed_sha256; return; }
    var done = await recompute(draw);
    done.steps.concat(done.problems).forEach(function (text) {
      var li = document.createElement("li"); li.textContent = text; list.appendChild(li);
    });
    var place = entry ? done.order.indexOf(entry) + 1 : 0;
    if (number && place && place !== number) done.problems.push("Your ticket says " + number + ", the draw gives " + place + ".");
    if (done.problems.length) {
      result.className = "notice warning";
      result.dataset.verified = "false";
      result.textContent = "Mismatch: the draw does not check out. " + done.problems.join(" ");
    } else if (entry && !place) {
      result.dataset.verified = "false";
      result.textContent = "Entry " + entry + " is not among the drawn entries (it joined after the start, or does not exist).";
    } else if (entry) {
      result.dataset.verified = "true";
      result.textContent = "Your place " + place + " is verified" + ": entry " + entry + " is number " + place + " of " + done.order.length + ".";
    } else {
      result.dataset.verified = "true";
      result.textContent = "The draw of " + done.order.length + " entries is verified. Enter an entry number to see its place.";
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var root = document.getElementById("verify");
    if (!root) return;
    var run = function (entry) {
      check(root, entry, Number(root.dataset.number) || 0).catch(function (e) {
        document.getElementById("verify-result").textContent = "Could not check the draw: " + e;
      });
    };
    run(Number(root.dataset.entry) || 0);
    document.getElementById("verify-form").addEventListener("submit", function (event) {
      event.preventDefault();
      root.dataset.number = "";
      run(Number(document.getElementById("verify-entry").value) || 0);
    });
  });
})();
