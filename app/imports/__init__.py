import re

# The routes that take a file: multipart, and read as a stream bounded by STEPWISE_MAX_UPLOAD_MB
# (app.imports.service). app.body_guard bounds every other body at the door.
UPLOAD_PATHS = re.compile(r"/api/v1/projects/[^/]+/imports|/manage/projects/[^/]+/import")
