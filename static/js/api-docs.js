// Swagger UI (from the drf-spectacular-sidecar package, served as our own static file) over the
// published schema; the page names the schema's address in data-schema-url.
(function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  if (!root || typeof SwaggerUIBundle === "undefined") return;
  SwaggerUIBundle({
    url: root.dataset.schemaUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    // Try it out sends the session cookie; a bearer token goes in through Authorize.
    withCredentials: true,
    // no badge from validator.swagger.io: the page's CSP allows images from this shop only
    validatorUrl: "none",
  });
})();
