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
  // "Try it out" rides on the login cookie, and a write on a cookie needs the session's CSRF
  // token (a bearer token, typed into a header, needs none).
  requestInterceptor: (request) => {
    const token = document.querySelector('meta[name="csrf-token"]')?.content;
    if (token && !["GET", "HEAD"].includes(String(request.method).toUpperCase())) {
      request.headers["X-CSRF-Token"] = token;
    }
    return request;
  },
});
