/* What the pages do in the browser, from this file only (the Content-Security-Policy runs no
   inline script): the upload form says it is sending, a delete asks first and fills in the
   document's id as its confirmation, and an error page's "Back" goes back a page. */
(function () {
  "use strict";
  var upload = document.getElementById("upload");
  if (upload) {
    upload.addEventListener("submit", function () {
      document.getElementById("upload-button").disabled = true;
      document.getElementById("upload-progress").hidden = false;
    });
  }
  document.querySelectorAll("form.delete").forEach(function (form) {
    form.addEventListener("submit", function (event) {
      var id = form.dataset.id;
      if (!window.confirm("Delete " + id + " and all its chunks? Agents stop seeing it at once.")) {
        event.preventDefault();
        return;
      }
      form.elements.confirm.value = id;
    });
  });
  document.querySelectorAll("a.back").forEach(function (link) {
    link.addEventListener("click", function (event) {
      if (window.history.length > 1) {
        event.preventDefault();
        window.history.back();
      }
    });
  });
}());
