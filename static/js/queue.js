// The waiting room follows the line live. A WebSocket pushes the drop's admitted-through mark
// (one broadcast per wave; this page knows its own ticket); while the socket is down the page
// polls the queue API instead and reconnects with backoff. When the mark passes the ticket, the
// API hands out the admission token and the page turns into the buy step. A unit that comes back
// is offered to the next ticket that never had one: the API's answer then carries the offer (a
// hold of its own, with a short deadline), and the page shows it with its way to pay.
// An early joiner's page knows its entry, not its number, until it asks. The draw's broadcast
// names the line's cut entries (admission/state.Cuts): the page computes its own draw key and
// theirs (admission/draw.py's rule) and so knows at once whether it is in, unlikely to get a
// unit, or between; only the first and the last ask for their number now, so a line of 50,000
// does not ask all at once, and the unlikely ask later, spread wide.
(function () {
  "use strict";
  var POLL_MS = 4000, TOKEN_REFRESH_MS = 60000, BACKOFF_MIN = 500, BACKOFF_MAX = 15000;
  // Pages told the same news at once ask the queue API within a spread that grows with how many
  // ask: the edge answers ~5 a millisecond without noticing, so 2,000 early joiners ask within
  // 0.4 s of the draw, 50,000 within 5 s, and a wave of 150 within 0.1 s.
  var ASKS_PER_MS = 5, SPREAD_MIN_MS = 100, SPREAD_MAX_MS = 5000;
  // A page told by its key that it is unlikely to get a unit asks for its exact number after the
  // first wave has bought, one page a millisecond at most across the line: 50,000 within a minute.
  var LATER_DELAY_MS = 5000, LATER_ASKS_PER_MS = 1, LATER_SPREAD_MAX_MS = 60000;
  var NO_SUCH_WAITING_ROOM = 4404;
  var TOO_MANY_SOCKETS = 4429;  // this address holds enough sockets: polling serves this page

  var SIZES_POLL_MS = 5000;  // while it is this buyer's turn in a drop sold in sizes
  var root, apiUrl, wsUrl, entry = null;
  var ticket = null, shownTicket = null, mark = 0, token = null, lastState = null, offered = false;
  var turnShown = false, sizesTimer = null, offerSaid = null;
  var socket = null, backoff = BACKOFF_MIN, pollTimer = null, tokenTimer = null, asking = false;

  function $(id) { return document.getElementById(id); }

  // What a screen reader hears. The place and the wait go to a polite status at most every
  // ANNOUNCE_EVERY_MS (a line moving every second would otherwise talk over everything); a new
  // state at once (its notice's words); the turn and an offer to an alert, and into the title.
  var ANNOUNCE_EVERY_MS = 30000, announcedAt = 0, announcedPlace = null, title = document.title;
  function announce(text) { $("queue-announce").textContent = text; }
  function alertNow(text) {
    document.title = words.turn_title + " · " + title;
    $("queue-alert").textContent = text;
  }
  function announcePlace(position, wait) {
    var now = Date.now();
    if (position === 0 || position === announcedPlace || now - announcedAt < ANNOUNCE_EVERY_MS) return;
    announcedAt = now;
    announcedPlace = position;
    announce(words.place.replace("{position}", number(position)).replace("{wait}", wait));
  }
  // The page's words, in its language (storefront_tags.queue_words): this file holds none.
  var words = {};
  function number(n) { return Number(n).toLocaleString(words.lang || "en"); }
  function plural(n, forms) { return forms[n === 1 ? 0 : 1].replace("{n}", number(n)); }

  function eta(position, pace, state) {
    if (position === 0) return words.soon;
    if (state === "paused") return words.paused;
    if (state === "all_held") return words.all_held;
    if (state === "sold_out") return words.sold_out;
    if (state !== "admitting") return "—";
    var range = waitRange(position, pace);
    return range ? waitWords(range[0], range[1]) : words.working;
  }

  // The wait for `position` more admissions at the measured pace, as its 10th and 90th percentiles
  // in seconds: admission/state.py's wait_range, which says why (the API gives the same numbers).
  var WAIT_Z = 1.2816;
  function waitRange(position, pacePerMinute) {
    if (!position || !(pacePerMinute > 0)) return null;
    var nu = 2 * position, shape = 1 - 2 / (9 * nu), spread = Math.sqrt(2 / (9 * nu));
    var perSecond = pacePerMinute / 60;
    function quantile(z) { return nu * Math.pow(shape + z * spread, 3) / (2 * perSecond); }
    return [Math.max(1, Math.floor(quantile(-WAIT_Z))), Math.max(1, Math.ceil(quantile(WAIT_Z)))];
  }

  // The range in words, never "0" (core/formatting.wait says it the same way for the page's first view).
  function waitWords(low, high) {
    if (high <= 60) return words.under_a_minute;
    var hours = high > 90 * 60, step = hours ? 3600 : 60;
    var top = Math.ceil(high / step), bottom = Math.max(1, Math.floor(low / step));
    var highWords = plural(top, hours ? words.hour : words.minute);
    if (low < step || bottom >= top) return words.up_to.replace("{time}", highWords);
    return words.between.replace("{low}", number(bottom)).replace("{high}", highWords);
  }

  // Render a queue message (from the socket) or the queue API's answer (which adds this buyer's place).
  function apply(msg) {
    if (!msg || typeof msg.admitted_through !== "number") return;
    if (msg.ticket !== undefined && msg.ticket !== null) ticket = msg.ticket;
    if (msg.offer !== undefined) showOffer(msg.offer);  // only the API's answers say (null: none)
    if (msg.result !== undefined) showResult(msg.result, msg.rank);
    if (msg.admission_token) showBuy(msg.admission_token);
    // Messages may cross (a reconnect's snapshot and a wave): the mark only moves forward.
    var jump = msg.admitted_through - mark;  // how many this message admits: about how many will ask
    mark = Math.max(mark, msg.admitted_through);
    var state = msg.state;
    root.dataset.state = state;
    if (msg.result === undefined && msg.format === "raffle" && ticket !== null && !offered &&
        (state === "sold_out" || state === "closed")) {
      showResult("lost");  // the socket's news: every unit sold (or the drop over), none can reach us
    }
    if (state !== lastState) {
      var first = lastState === null;
      lastState = state;
      document.querySelectorAll("#queue-state [data-when]").forEach(function (el) {
        el.hidden = el.dataset.when !== state;
        // A change is said once (not the page's first state, which is read with the page; nor the
        // countdown before the start, which would be read every second).
        if (!first && !el.hidden && state !== "scheduled") announce(el.textContent.trim());
      });
    }
    var coming = msg.returning || 0;
    $("remaining").textContent = words.left.replace("{units}", plural(msg.remaining + coming, words.unit)) +
      (coming ? words.coming.replace("{n}", number(coming)) : "");
    if (msg.seed_sha256) $("seed-sha256").textContent = msg.seed_sha256;
    if (msg.seed) { $("seed").textContent = msg.seed; $("seed-line").hidden = false; }

    if (ticket === null) {
      // Before the draw this page only knows its entry; once the seed is out, its key places it.
      if (msg.seed) placeByKey(msg, jump);
      return;
    }
    var position = Math.max(0, ticket - mark);
    if (shownTicket !== ticket) {
      shownTicket = ticket;
      var strong = document.createElement("strong");
      strong.id = "ticket";
      strong.textContent = "#" + number(ticket);
      $("ticket-line").replaceChildren(words.ticket + " ", strong);
    }
    $("position-line").hidden = false;
    $("position").textContent = number(position);
    var ahead = Math.max(0, position - 1);
    // As state.unlikely: at least as many buyers ahead (waiting, or let in and not bought yet) as
    // units that could still reach the line.
    var before = ahead + (msg.admitted_unclaimed || 0);
    var left = msg.remaining + coming + (msg.held || 0);
    var unlikely = position > 0 && before >= left;
    $("unlikely").hidden = !unlikely;
    if (unlikely) {
      $("unlikely").textContent = words.unlikely.replace("{ahead}", number(before))
        .replace("{units}", plural(left, words.unit));
    }
    $("ahead").textContent = position === 0 ? "" : " · " + (ahead === 0 ? words.next : plural(ahead, words.people));
    var progress = $("progress");
    progress.hidden = false;
    progress.max = ticket;
    progress.value = Math.min(mark, ticket);
    $("eta").textContent = eta(position, msg.pace_per_minute, state);
    announcePlace(position, $("eta").textContent);

    if (state === "sold_out" && position > 0) {
      $("waiting").hidden = true;  // nothing can come back: the line is closed, stop saying "wait"
    } else if (!token) {
      $("waiting").hidden = false;
    }
    if (state === "closed") stopTokenRefresh();
    if (state !== "closed" && position === 0 && !token) {
      askSoon(spread(jump));  // admitted: the token comes from the API (the broadcast is for everyone)
    } else if (msg.offer === undefined && !offered && (msg.offered_through || 0) >= ticket) {
      // The socket says returned units (or, after the sale, units on the exchange) were offered
      // through this ticket: ask at once whether one is ours (an admitted buyer with a token would
      // otherwise hear at its next refresh).
      askSoon(SPREAD_MIN_MS);
    }
    syncTurn(state);
  }

  // What the turn offers follows from one state, so the page never offers what the server would
  // refuse: Reserve while units are on sale; during a pause the turn is kept (the token too) but
  // Reserve waits (423 otherwise); all held, sold out or closed, there is nothing to reserve, and
  // an offered unit is paid for from the offer, not reserved.
  function syncTurn(state) {
    var turn = !!token && !offered && (state === "admitting" || state === "paused");
    $("buy-step").hidden = !turn;
    $("buy").hidden = state === "paused";
    $("turn-paused").hidden = state !== "paused";
    if (turn && !turnShown) {
      turnShown = true;
      $("waiting").hidden = true;
      $("buy-heading").focus();
      alertNow(words.your_turn);
      watchSizes();
    }
  }

  // The sizes left, while the buyer chooses: the drop's JSON (as the drop page's watcher reads it)
  // passed on to buy.js, which disables a size gone.
  function watchSizes() {
    var url = root.dataset.dropUrl;
    if (!url || sizesTimer) return;
    sizesTimer = setInterval(function () {
      if ($("buy-step").hidden) return;
      fetch(url, {headers: {"Accept": "application/json"}})
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (d) {
          if (d) document.dispatchEvent(new CustomEvent("floodgate:drop", {detail: d}));
        })
        .catch(function () {});
    }, SIZES_POLL_MS);
  }

  // Where this page's draw key falls against the broadcast's cut entries. Without WebCrypto (a
  // page served over plain HTTP) or without cuts, the page asks for its number as before.
  var enc = window.TextEncoder ? new TextEncoder() : null;
  function drawKey(prefix, e) { return crypto.subtle.digest("SHA-256", enc.encode(prefix + e)); }
  function compare(a, b) {
    var x = new Uint8Array(a), y = new Uint8Array(b);
    for (var i = 0; i < x.length; i++) { if (x[i] !== y[i]) return x[i] - y[i]; }
    return 0;
  }
  function placeByKey(msg, jump) {
    var cuts = msg.admitted_entry || msg.unlikely_entry;
    if (!(window.crypto && crypto.subtle && enc) || entry === null || typeof msg.entries_sha256 !== "string" || !cuts) {
      askSoon(spread(msg.last_ticket));
      return;
    }
    var prefix = msg.seed + ":" + msg.entries_sha256 + ":" + (msg.beacon || "") + ":";
    Promise.all([
      drawKey(prefix, entry),
      msg.admitted_entry ? drawKey(prefix, msg.admitted_entry) : null,
      msg.unlikely_entry ? drawKey(prefix, msg.unlikely_entry) : null
    ]).then(function (keys) {
      if (ticket !== null) return;  // the number came meanwhile
      var behind = !!keys[2] && compare(keys[0], keys[2]) >= 0;
      $("unlikely").hidden = !behind;  // (a cut moved back past this page: no longer unlikely)
      if (keys[1] && compare(keys[0], keys[1]) <= 0) {
        askSoon(spread(jump));  // in: the token comes from the API, as for the wave's other pages
      } else if (behind) {
        showUnlikelyByKey(msg);
        askSoon(Math.min(LATER_SPREAD_MAX_MS, Math.max(SPREAD_MIN_MS, msg.last_ticket / LATER_ASKS_PER_MS)), LATER_DELAY_MS);
      } else {
        askSoon(spread((msg.unlikely_from || msg.last_ticket) - msg.admitted_through));
      }
    }).catch(function () { askSoon(spread(msg.last_ticket)); });
  }

  // Behind the unlikely cut: at least as many ahead as the cut's ticket has (state.unlikely).
  function showUnlikelyByKey(msg) {
    var ahead = Math.max(0, msg.unlikely_from - msg.admitted_through - 1) + (msg.admitted_unclaimed || 0);
    var left = msg.remaining + (msg.returning || 0) + (msg.held || 0);
    $("unlikely").textContent = words.unlikely_by_key.replace("{ahead}", number(ahead))
      .replace("{units}", plural(left, words.unit));
    $("ticket-line").textContent = words.drawn_behind.replace("{n}", number(msg.unlikely_from));
  }

  function showBuy(fresh) {
    token = fresh;
    $("admission-token").value = fresh;
    // A token lives two minutes; keep the form's fresh while the buyer decides.
    if (!tokenTimer) tokenTimer = setInterval(ask, TOKEN_REFRESH_MS);
    syncTurn(lastState);
  }

  // A returned unit held for this ticket: its deadline and the way to pay; or the news that it
  // was not paid for in time and went on to the next ticket.
  // A raffle's result (the API's answers only): won, reserve with its rank, lost; null before the draw.
  function showResult(result, rank) {
    var box = $("raffle-result");
    if (!box) return;
    box.querySelectorAll("[data-result-is]").forEach(function (el) {
      el.hidden = el.dataset.resultIs !== (result || "");
    });
    if (rank && $("raffle-rank")) $("raffle-rank").textContent = number(rank);
  }

  function showOffer(offer) {
    var open = !!offer && offer.state === "held";
    $("offer").hidden = !open;
    $("queue-state").hidden = open;  // "all held, stay in line" is not this buyer's news now
    $("offer-lapsed").hidden = !(offer && offer.state === "lapsed");
    $("offer-sold").hidden = !(offer && offer.state === "sold");
    if (!offer) return;
    offered = true;
    syncTurn(lastState);
    $("waiting").hidden = true;
    var link = root.dataset.holdUrl.replace(/0\/$/, offer.hold + "/");
    $("offer-pay").href = link;
    $("offer-sold-link").href = link;
    if (!open) return;
    $("offer-size").hidden = !offer.variant;
    $("offer-variant").textContent = offer.variant || "";
    var until = new Date(offer.expires_at);
    $("offer-until").textContent = until.toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"});
    $("offer-until").dateTime = offer.expires_at;
    if (offerSaid !== offer.hold) {  // once per offer: later answers do not take the focus back
      offerSaid = offer.hold;
      $("offer-heading").focus();
      alertNow(words.offered.replace("{time}", $("offer-until").textContent));
    }
  }

  function stopTokenRefresh() {
    if (tokenTimer) { clearInterval(tokenTimer); tokenTimer = null; }
  }

  // GET the queue API (session cookie): this buyer's ticket, position, and token once admitted.
  function ask() {
    if (asking) return;
    asking = true;
    fetch(apiUrl, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(apply)
      .catch(function () {})
      .finally(function () { asking = false; });
  }

  // Every early joiner learns of the draw from the same broadcast, every admitted buyer of the
  // wave from another: spread their requests so they do not reach the server in one instant.
  var soonTimer = null, soonAt = 0;
  function spread(askers) {
    return Math.min(SPREAD_MAX_MS, Math.max(SPREAD_MIN_MS, (askers || 0) / ASKS_PER_MS));
  }
  function askSoon(spreadMs, delayMs) {
    var at = Date.now() + (delayMs || 0) + Math.random() * spreadMs;
    if (soonTimer && soonAt <= at) return;  // an earlier ask is already due
    clearTimeout(soonTimer);
    soonAt = at;
    soonTimer = setTimeout(function () { soonTimer = null; ask(); }, at - Date.now());
  }

  function startPolling() {
    if (!pollTimer) pollTimer = setInterval(ask, POLL_MS);
  }

  function stopPolling() {
    if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
  }

  function connection(text) { $("connection").textContent = text; }

  function connect() {
    try {
      socket = new WebSocket(wsUrl);
    } catch (e) {
      retry();
      return;
    }
    socket.onopen = function () {
      backoff = BACKOFF_MIN;
      connection(words.live);
      stopPolling();
    };
    socket.onmessage = function (event) {
      try { apply(JSON.parse(event.data)); } catch (e) { /* not a queue message */ }
    };
    socket.onclose = function (event) {
      socket = null;
      startPolling();
      if (event.code === NO_SUCH_WAITING_ROOM || event.code === TOO_MANY_SOCKETS) {
        connection(words.polling);
        return;
      }
      retry();
    };
  }

  function retry() {
    connection(words.reconnecting);
    startPolling();
    // Jitter: thousands of pages lose the same server at once and must not return in step.
    setTimeout(connect, backoff / 2 + Math.random() * backoff);
    backoff = Math.min(backoff * 2, BACKOFF_MAX);
  }

  // The start: until the first snapshot after it arrives, the page says the draw is under way
  // (not "starts in a moment"). It asks nothing more: the draw's broadcast (or the polling while
  // the socket is down) brings the place, and every early joiner reaches this moment together.
  document.addEventListener("floodgate:started", function () {
    document.querySelectorAll("[data-before-start]").forEach(function (el) { el.hidden = true; });
    document.querySelectorAll("[data-after-start]").forEach(function (el) {
      el.hidden = false;
      announce(el.textContent.trim());
    });
  });

  document.addEventListener("DOMContentLoaded", function () {
    root = $("queue");
    if (!root) return;
    apiUrl = root.dataset.apiUrl;
    wsUrl = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + root.dataset.wsPath;
    words = JSON.parse($("queue-words").textContent);
    var initial = JSON.parse($("queue-data").textContent);
    if (typeof initial.entry === "number") entry = initial.entry;
    if (initial.admission_token) showBuy(initial.admission_token);
    apply(initial);
    if ("WebSocket" in window) { connect(); } else { startPolling(); }
  });
})();
