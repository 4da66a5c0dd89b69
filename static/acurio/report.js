/* The report page: a problem's marker link scrolls the document to that citation and flashes it. */
(function () {
  "use strict";
  var doc = document.querySelector("#document .doc");
  if (!doc) { return; }
  document.addEventListener("click", function (event) {
    var link = event.target.closest("a[data-cite]");
    if (!link) { return; }
    var mark = doc.querySelector('mark[data-index="' + link.dataset.cite + '"]');
    if (!mark) { return; } // not placed in the text: fall back to the #document anchor
    event.preventDefault();
    mark.scrollIntoView({ behavior: "smooth", block: "center" });
    mark.classList.add("flash");
    setTimeout(function () { mark.classList.remove("flash"); }, 1600);
  });
})();
