/* Dataset pages: drag-and-drop upload with a progress bar, hierarchy builder fields, confirms.
   No dependencies besides htmx (vendored); works on pages swapped in by htmx. */
(function () {
  "use strict";

  function setupUpload(root) {
    var form = root.querySelector ? root.querySelector("#upload-form") : null;
    if (!form || form.dataset.ready) return;
    form.dataset.ready = "1";
    var zone = form.querySelector("#dropzone");
    var input = form.querySelector("input[type=file]");
    var chosen = form.querySelector("#dropzone-file");
    var clientError = form.querySelector("#upload-client-error");
    var box = form.querySelector("#upload-progress-box");
    var bar = form.querySelector("#upload-progress");
    var percent = form.querySelector("#upload-percent");
    var maxBytes = parseInt(form.dataset.maxBytes || "0", 10);

    function showChosen() {
      var file = input.files && input.files[0];
      chosen.textContent = file ? file.name + " (" + Math.max(1, Math.round(file.size / 1024)) + " KB)" : "";
      zone.classList.toggle("has-file", !!file);
      clientError.hidden = true;
      if (file && maxBytes && file.size > maxBytes) {
        clientError.textContent = form.dataset.limitMessage;
        clientError.hidden = false;
      }
    }

    ["dragenter", "dragover"].forEach(function (name) {
      zone.addEventListener(name, function (event) {
        event.preventDefault();
        zone.classList.add("dragging");
      });
    });
    ["dragleave", "dragend"].forEach(function (name) {
      zone.addEventListener(name, function () { zone.classList.remove("dragging"); });
    });
    zone.addEventListener("drop", function (event) {
      event.preventDefault();
      zone.classList.remove("dragging");
      if (event.dataTransfer && event.dataTransfer.files.length) {
        input.files = event.dataTransfer.files;
        showChosen();
      }
    });
    input.addEventListener("change", showChosen);

    form.addEventListener("htmx:confirm", function (event) {
      var file = input.files && input.files[0];
      if (file && maxBytes && file.size > maxBytes) {
        event.preventDefault();  // refused before a byte is sent
        clientError.textContent = form.dataset.limitMessage;
        clientError.hidden = false;
      }
    });
    form.addEventListener("htmx:beforeRequest", function () {
      box.hidden = false;
      bar.value = 0;
      percent.textContent = "0 %";
    });
    form.addEventListener("htmx:xhr:progress", function (event) {
      var detail = event.detail || {};
      if (detail.lengthComputable && detail.total) {
        var value = Math.round((detail.loaded / detail.total) * 100);
        bar.value = value;
        percent.textContent = value === 100 ? "100 % — reading the file…" : value + " %";
      }
    });
  }

  function setupBuilders(root) {
    (root.querySelectorAll ? root.querySelectorAll(".builder") : []).forEach(function (builder) {
      var select = builder.querySelector("select");
      if (!select) return;
      function toggle() {
        builder.querySelectorAll(".param").forEach(function (param) {
          param.hidden = !param.classList.contains("param-" + select.value);
        });
      }
      select.addEventListener("change", toggle);
      toggle();
    });
  }

  document.addEventListener("submit", function (event) {
    var message = event.target.dataset && event.target.dataset.confirm;
    if (message && !window.confirm(message)) event.preventDefault();
  });

  function setup(root) {
    setupUpload(root);
    setupBuilders(root);
  }
  document.addEventListener("DOMContentLoaded", function () { setup(document); });
  document.addEventListener("htmx:load", function (event) { setup(event.detail.elt); });
  if (document.readyState !== "loading") setup(document);
})();
