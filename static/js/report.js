// Check the signed-in buyer's outcome against the drop's published Merkle root in the browser
// (fairness/merkle.py is the same rule, RFC 9162): download the inclusion proof, hash the outcome
// line as a leaf, walk the sibling hashes up with WebCrypto SHA-256, and compare the root reached
// with the one the report published. Nothing the shop computed is taken on trust but that root.
(function () {
  "use strict";
  var words = {};
  function say(key, values) {
    return words[key].replace(/\{(\w+)\}/g, function (all, name) { return values && name in values ? values[name] : all; });
  }
  function bytes(hexText) {
    return new Uint8Array((hexText.match(/[0-9a-f]{2}/g) || []).map(function (h) { return parseInt(h, 16); }));
  }
  function hex(buffer) {
    return Array.from(new Uint8Array(buffer)).map(function (b) { return b.toString(16).padStart(2, "0"); }).join("");
  }
  async function hashed(prefix, parts) {
    var size = 1 + parts.reduce(function (n, p) { return n + p.length; }, 0), all = new Uint8Array(size), at = 1;
    all[0] = prefix;
    parts.forEach(function (p) { all.set(p, at); at += p.length; });
    return new Uint8Array(await crypto.subtle.digest("SHA-256", all));
  }
  // The root the path leads to from leaf `index` of `size`, or null if it cannot fit such a tree.
  async function rootFromProof(leaf, index, size, path) {
    if (!(index >= 0 && index < size)) return null;
    var fn = index, sn = size - 1, r = await hashed(0, [new TextEncoder().encode(leaf)]);
    for (var i = 0; i < path.length; i++) {
      if (sn === 0) return null;
      var sibling = bytes(path[i]);
      if (fn % 2 === 1 || fn === sn) {
        r = await hashed(1, [sibling, r]);
        while (fn % 2 === 0 && fn !== 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
      } else {
        r = await hashed(1, [r, sibling]);
      }
      fn = Math.floor(fn / 2); sn = Math.floor(sn / 2);
    }
    return sn === 0 ? hex(r) : null;
  }

  async function check(section, result) {
    var doc;
    try {
      var answer = await fetch(section.dataset.proofUrl, {credentials: "same-origin", headers: {Accept: "application/json"}});
      doc = await answer.json();
    } catch (error) {
      doc = null;
    }
    var published = section.dataset.root, why = null;
    var hex64 = /^[0-9a-f]{64}$/;
    if (!doc || typeof doc.leaf !== "string" || !Array.isArray(doc.proof) ||
        !doc.proof.every(function (h) { return typeof h === "string" && hex64.test(h); })) {
      why = say("unreadable");
    } else if (doc.leaf.indexOf("entry=" + section.dataset.entry + ";") !== 0) {
      why = say("not_yours");
    } else if (doc.leaf !== document.getElementById("report-leaf").textContent) {
      why = say("not_shown");
    } else {
      var computed = await rootFromProof(doc.leaf, doc.index, doc.size, doc.proof);
      if (computed === null) why = say("bad_shape");
      else if (computed !== published) why = say("wrong_root", {computed: computed});
    }
    result.textContent = why === null ? say("verified", {root: published}) : say("mismatch", {why: why});
    result.dataset.verified = why === null ? "true" : "false";
  }

  document.addEventListener("DOMContentLoaded", function () {
    var section = document.getElementById("report-mine"), result = document.getElementById("report-result");
    if (!section || !result) return;
    words = JSON.parse(document.getElementById("report-words").textContent);
    result.textContent = say("checking");
    check(section, result);
  });
})();
