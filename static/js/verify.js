// Redo the waiting room's draw in the browser (admission/draw.py is the same rule): fetch the
// published JSON, check the seed against the hash committed before the first join, the entry list
// against the hash published at its close, the beacon value against the SHA-256 of the drand
// round's signature (and the close against the round's time), recompute every entry's key with
// WebCrypto SHA-256, sort, and compare the buyer's place (and the published order) with the result.
// The round's BLS signature is left to verify_draw: there is no BLS code in this page.
(function () {
  "use strict";
  var enc = new TextEncoder();

  function hex(buffer) {
    return Array.from(new Uint8Array(buffer)).map(function (b) { return b.toString(16).padStart(2, "0"); }).join("");
  }
  function sha256(text) { return crypto.subtle.digest("SHA-256", enc.encode(text)); }
  function sha256Hex(hexText) {
    var bytes = new Uint8Array((hexText.match(/[0-9a-f]{2}/g) || []).map(function (h) { return parseInt(h, 16); }));
    return crypto.subtle.digest("SHA-256", bytes);
  }

  async function beaconSteps(draw, beacon, steps, problems) {
    var status = draw.beacon_status || "none", round = "drand " + draw.beacon_chain_name + " round " + draw.beacon_round;
    if (status === "none") {
      if (beacon) problems.push("A beacon value is mixed in, but no beacon round was named.");
      else steps.push("No beacon round was named: the order rests on the seed and the entry list alone.");
      return;
    }
    if (!(Date.parse(draw.entries_closed_at) < Date.parse(draw.beacon_round_at))) {
      problems.push("The entry list did not close before " + round + " was due.");
    } else {
      steps.push("The entry list closed (" + draw.entries_closed_at + ") before " + round + " was due (" + draw.beacon_round_at + ").");
    }
    if (status === "unreachable") {
      if (beacon) problems.push("The round was not read, yet a beacon value is mixed in.");
      else steps.push(round + " could not be read at the draw (" + draw.beacon_note + "): the order rests on the committed seed and the entry list alone.");
      return;
    }
    var signature = draw.beacon_signature || "";
    if (status === "verified" && /^[0-9a-f]+$/.test(signature) && hex(await sha256Hex(signature)) === beacon) {
      steps.push("The beacon value " + beacon + " is the SHA-256 of " + round + "'s signature (the signature itself: manage.py verify_draw or any drand client).");
    } else {
      problems.push("The beacon value is not the SHA-256 of " + round + "'s published signature.");
    }
  }
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
    if (listed === draw.entries_sha256) steps.push("The list of " + entries.length + " entries matches the hash published when it closed.");
    else problems.push("The list of entries does not match the hash published when it closed.");
    var beacon = draw.beacon || "";
    await beaconSteps(draw, beacon, steps, problems);
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
