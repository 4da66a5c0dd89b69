/* The upload page: refuse a file over the size limit before sending megabytes for nothing.
 * The server checks again; this only saves the user the wait. */
(function () {
  "use strict";
  var form = document.getElementById("upload-form");
  if (!form) { return; }
  var maxBytes = parseInt(form.dataset.maxBytes, 10);
  var errorEl = document.getElementById("client-error");
  var button = document.getElementById("upload-submit");
  form.addEventListener("submit", function (event) {
    var inputs = form.querySelectorAll("input[type=file]");
    for (var i = 0; i < inputs.length; i++) {
      var file = inputs[i].files && inputs[i].files[0];
      if (file && file.size > maxBytes) {
        event.preventDefault();
        errorEl.textContent = file.name + ": " + form.dataset.tooBig;
        errorEl.hidden = false;
        return;
      }
    }
    button.disabled = true;
    button.textContent = "Uploading…";
  });
})();
