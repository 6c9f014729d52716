// The waiting room's proof of work (admission/work.py): before a join button of a drop that asks
// for one may be pressed, find a nonce whose sha256("<challenge>:<nonce>") starts with the
// drop's number of zero bits. A Web Worker counts nonces in the background (a plain SHA-256 of
// one block, reused: WebCrypto's is asynchronous per hash, far too slow for a million of them).
(function () {
  "use strict";

  function worker() {
    var K = new Uint32Array([
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2]);
    var W = new Uint32Array(64), M = new Uint32Array(16);

    // The first two words of sha256 of the one 64-byte block in M (a message of at most 55 bytes).
    function firstWords() {
      var i;
      for (i = 0; i < 16; i++) W[i] = M[i];
      for (i = 16; i < 64; i++) {
        var x = W[i - 15], y = W[i - 2];
        var s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
        var s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
        W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
      }
      var a = 0x6a09e667, b = 0xbb67ae85, c = 0x3c6ef372, d = 0xa54ff53a,
          e = 0x510e527f, f = 0x9b05688c, g = 0x1f83d9ab, h = 0x5be0cd19;
      for (i = 0; i < 64; i++) {
        var S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
        var t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
        var S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
        var t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
        h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
      }
      return [(0x6a09e667 + a) >>> 0, (0xbb67ae85 + b) >>> 0];
    }

    function zeroBits(words) {
      if (words[0] !== 0) return Math.clz32(words[0]);
      return 32 + Math.clz32(words[1]);
    }

    // "<challenge>:<nonce>" into M, big-endian, padded: the challenge's bytes once, each nonce's
    // after them (ASCII: the challenge is digits, hex and dots, the nonce hex).
    function put(byteIndex, value) {
      M[byteIndex >> 2] |= value << (24 - (byteIndex & 3) * 8);
    }

    self.onmessage = function (event) {
      var prefix = event.data.challenge + ":", bits = event.data.bits, p = prefix.length, i;
      if (p > 40) { self.postMessage({nonce: ""}); return; }  // not one of ours: it would not fit one block
      for (var n = 0; ; n++) {
        if ((n & 0xffff) === 0 && n) self.postMessage({tried: n});  // the page shows how far it got
        var nonce = n.toString(16), length = p + nonce.length;
        M.fill(0);
        for (i = 0; i < p; i++) put(i, prefix.charCodeAt(i));
        for (i = 0; i < nonce.length; i++) put(p + i, nonce.charCodeAt(i));
        put(length, 0x80);
        M[15] = length * 8;
        if (zeroBits(firstWords()) >= bits) {
          self.postMessage({nonce: nonce});
          return;
        }
      }
    };
  }

  // While it works the button stays in the tab order (aria-disabled, not disabled: a disabled
  // button is skipped and greyed out), and a progress bar with a status line says how far it is:
  // the expected tries are 2^bits, so the share is an estimate, held under 95 % until done. The
  // status is spoken at most every few seconds; the words come from join_button.html.
  var SAY_EVERY_MS = 5000;
  function start(root) {
    root.querySelectorAll("form.join[data-work-bits]").forEach(function (form) {
      if (!form.dataset.working) { form.dataset.working = "1"; prove(form); }
    });
  }
  document.addEventListener("floodgate:refreshed", function (event) { start(event.detail); });

  function prove(form) {
    var button = form.querySelector("button[type=submit]");
    var bits = parseInt(form.dataset.workBits, 10), expected = Math.pow(2, bits);
    var ready = false, saidAt = 0;
    var status = document.createElement("p");
    status.className = "work-progress";
    status.setAttribute("role", "status");
    var bar = document.createElement("progress");
    bar.max = 100;
    bar.value = 0;
    bar.setAttribute("aria-label", form.dataset.sayPreparing);
    var words = document.createElement("span");
    status.append(bar, " ", words);
    form.append(status);
    button.setAttribute("aria-disabled", "true");

    function show(percent, force) {
      bar.value = percent;
      if (force || Date.now() - saidAt >= SAY_EVERY_MS) {
        saidAt = Date.now();
        words.textContent = form.dataset.sayProgress.replace("{percent}", String(percent));
      }
    }
    show(0, true);
    form.addEventListener("submit", function (event) {
      if (ready) return;
      event.preventDefault();  // pressed early: say how far it is, now
      show(bar.value, true);
    });

    var source = "(" + worker.toString() + ")()";
    var job = new Worker(URL.createObjectURL(new Blob([source], {type: "text/javascript"})));
    job.onmessage = function (event) {
      if (event.data.tried !== undefined) {
        show(Math.min(95, Math.floor(100 * event.data.tried / expected)), false);
        return;
      }
      form.elements.namedItem("proof").value = event.data.nonce;
      ready = true;
      button.removeAttribute("aria-disabled");
      bar.value = 100;
      words.textContent = form.dataset.sayReady;
      job.terminate();
    };
    job.postMessage({challenge: form.dataset.workChallenge, bits: bits});
  }
  start(document);
})();
