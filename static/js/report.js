/* The release report's print button (no inline script: the Content-Security-Policy forbids it). */
(function () {
  "use strict";
  document.querySelectorAll("[data-print]").forEach(function (button) {
    button.addEventListener("click", function () { window.print(); });
  });
})();
