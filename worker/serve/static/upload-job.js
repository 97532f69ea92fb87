/* The upload's job page: polls the job's status (same origin, the session's cookie) and shows
   the stage and how far it is; once the ingest has ended, reloads the page, which the worker
   renders with the report or the error. Text is set as text, never as HTML. */
(function () {
  "use strict";
  var job = document.getElementById("job");
  if (!job || job.dataset.state !== "running") {
    return;
  }
  var bar = document.getElementById("job-progress");
  var stage = document.getElementById("job-stage");
  var steps = document.getElementById("job-steps");

  function show(status) {
    stage.textContent = status.message + "\u2026";
    if (status.total) {
      bar.max = status.total;
      bar.value = status.done;
    } else {
      bar.removeAttribute("value"); // under way, how far unknown
    }
    steps.textContent = "";
    status.steps.forEach(function (step) {
      var item = document.createElement("li");
      item.textContent = step.label;
      if (step.seconds !== null) {
        var took = document.createElement("span");
        took.className = "muted";
        took.textContent = " " + step.seconds.toFixed(1) + " s";
        item.appendChild(took);
      }
      steps.appendChild(item);
    });
  }

  function poll() {
    fetch(job.dataset.status, {credentials: "same-origin", cache: "no-store", headers: {Accept: "application/json"}})
      .then(function (response) {
        if (response.status === 401 || response.status === 404) {
          window.location.reload(); // signed out, or gone: the page says which
          return null;
        }
        if (!response.ok) {
          throw new Error("status " + response.status);
        }
        return response.json();
      })
      .then(function (status) {
        if (status === null) {
          return;
        }
        if (status.state !== "running") {
          window.location.reload();
          return;
        }
        show(status);
        window.setTimeout(poll, 500);
      })
      .catch(function () {
        window.setTimeout(poll, 2000); // a restart or a dropped connection: try again
      });
  }

  window.setTimeout(poll, 300);
})();
