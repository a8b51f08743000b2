// Starts Swagger UI on /api/v1/docs. A file of its own rather than FastAPI's inline script,
// which the platform's Content-Security-Policy (script-src 'self') would block.

const root = document.getElementById("swagger-ui");

window.ui = window.SwaggerUIBundle({
  url: root.dataset.openapiUrl,
  domNode: root,
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [window.SwaggerUIBundle.presets.apis],
  // Off by default, the badge would send the schema's URL to validator.swagger.io.
  validatorUrl: null,
});
