// Redo the waiting room's draw in the browser (admission/draw.py is the same rule): fetch the
// published JSON, check the seed against the hash committed before the first join, the entry list
// against the hash published at its close, the beacon value against the SHA-256 of the drand
// round's signature (and the close against the round's time), recompute every entry's key with
// WebCrypto SHA-256, sort, and compare the buyer's place (and the published order) with the result.
// The round's BLS signature is left to verify_draw: there is no BLS code in this page.
(function () {
  "use strict";
  var enc = new TextEncoder();
  // The page's words, in its language (storefront_tags.verify_words): this file holds none.
  var words = {};
  function say(key, values) {
    return words[key].replace(/\{(\w+)\}/g, function (all, name) { return values && name in values ? values[name] : all; });
  }

  function hex(buffer) {
    return Array.from(new Uint8Array(buffer)).map(function (b) { return b.toString(16).padStart(2, "0"); }).join("");
  }
  function sha256(text) { return crypto.subtle.digest("SHA-256", enc.encode(text)); }
  function sha256Hex(hexText) {
    var bytes = new Uint8Array((hexText.match(/[0-9a-f]{2}/g) || []).map(function (h) { return parseInt(h, 16); }));
    return crypto.subtle.digest("SHA-256", bytes);
  }

  async function beaconSteps(draw, beacon, steps, problems) {
    var status = draw.beacon_status || "none", round = say("round", {chain: draw.beacon_chain_name, round: draw.beacon_round});
    if (status === "none") {
      if (beacon) problems.push(say("beacon_unnamed"));
      else steps.push(say("no_beacon"));
      return;
    }
    if (!(Date.parse(draw.entries_closed_at) < Date.parse(draw.beacon_round_at))) {
      problems.push(say("late_close", {round: round}));
    } else {
      steps.push(say("closed_in_time", {closed: draw.entries_closed_at, round: round, due: draw.beacon_round_at}));
    }
    if (status === "unreachable") {
      if (beacon) problems.push(say("unread_mixed"));
      else steps.push(say("unread", {round: round, note: draw.beacon_note}));
      return;
    }
    var signature = draw.beacon_signature || "";
    if (status === "verified" && /^[0-9a-f]+$/.test(signature) && hex(await sha256Hex(signature)) === beacon) {
      steps.push(say("beacon_ok", {beacon: beacon, round: round}));
    } else {
      problems.push(say("beacon_bad", {round: round}));
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
    if (hex(await sha256(draw.seed)) === draw.seed_sha256) steps.push(say("seed_ok"));
    else problems.push(say("seed_bad"));
    var listed = hex(await sha256(entries.join(",")));
    if (listed === draw.entries_sha256) steps.push(say("list_ok", {count: entries.length}));
    else problems.push(say("list_bad"));
    var beacon = draw.beacon || "";
    await beaconSteps(draw, beacon, steps, problems);
    var keyed = await Promise.all(entries.map(async function (entry) {
      return {entry: entry, key: await sha256(draw.seed + ":" + draw.entries_sha256 + ":" + beacon + ":" + entry)};
    }));
    keyed.sort(compare);
    var order = keyed.map(function (k) { return k.entry; });
    if (Array.isArray(draw.order)) {
      if (order.join(",") === draw.order.join(",")) steps.push(say("order_ok"));
      else problems.push(say("order_bad"));
    }
    return {order: order, problems: problems, steps: steps};
  }

  async function check(root, entry, number) {
    var result = document.getElementById("verify-result");
    var list = document.getElementById("verify-steps");
    list.replaceChildren();
    result.className = "notice";
    if (!(window.crypto && crypto.subtle)) { result.textContent = say("no_crypto"); return; }
    var draw = await fetch(root.dataset.drawUrl, {headers: {"Accept": "application/json"}}).then(function (r) { return r.json(); });
    if (!draw.drawn) { result.textContent = say("not_drawn", {sha: draw.seed_sha256}); return; }
    var done = await recompute(draw);
    done.steps.concat(done.problems).forEach(function (text) {
      var li = document.createElement("li"); li.textContent = text; list.appendChild(li);
    });
    var place = entry ? done.order.indexOf(entry) + 1 : 0;
    if (number && place && place !== number) done.problems.push(say("ticket_differs", {number: number, place: place}));
    if (done.problems.length) {
      result.className = "notice warning";
      result.dataset.verified = "false";
      result.textContent = say("mismatch", {problems: done.problems.join(" ")});
    } else if (entry && !place) {
      result.dataset.verified = "false";
      result.textContent = say("not_among", {entry: entry});
    } else if (entry) {
      result.dataset.verified = "true";
      result.textContent = say("place_ok", {place: place, entry: entry, count: done.order.length});
    } else {
      result.dataset.verified = "true";
      result.textContent = say("all_ok", {count: done.order.length});
    }
    // It adds up; on the seed alone that does not mean nobody could steer it: say what to trust.
    result.dataset.unsteerable = String(draw.unsteerable === true);
    if (!done.problems.length && draw.trust) {
      if (draw.unsteerable !== true) result.className = "notice warning";
      result.textContent += " " + draw.trust;
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var root = document.getElementById("verify");
    if (!root) return;
    words = JSON.parse(document.getElementById("verify-words").textContent);
    var run = function (entry) {
      check(root, entry, Number(root.dataset.number) || 0).catch(function (e) {
        document.getElementById("verify-result").textContent = say("failed", {error: String(e)});
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
