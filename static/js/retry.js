// The busy page's join, sent again by itself when its countdown ends (the server's Retry-After
// with a spread): the same POST the button sends, so the buyer's join is not forgotten.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("retry-join");
    var clock = document.getElementById("retry-countdown");
    if (!form || !clock) return;
    clock.addEventListener("floodgate:done", function () { form.submit(); });
  });
})();
