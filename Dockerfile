# syntax=docker/dockerfile:1
# The Stepwise image: the `stepwise` command (API server, migrations, CLI) on Python 3.11 with
# PyTorch's CPU build. docker-compose.yml runs it; to build by hand:
#
#   docker build -t stepwise .
#   docker build -t stepwise:cuda --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 .

# Debian 12 (bookworm), named: the unnamed slim tag moved to Debian 13, whose PostgreSQL client
# (17) writes restore SQL that the compose file's PostgreSQL 15 refuses (SET transaction_timeout).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: vendor KaTeX and build the wheel that carries it --------------------------------
# npm is needed once, to fetch KaTeX so that pages serve math rendering themselves (never from
# a CDN); it stays behind in this stage and the runtime image holds no Node.js.
FROM ${PYTHON_IMAGE} AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
COPY labeler_ui ./labeler_ui
COPY active_learning ./active_learning
COPY migrations ./migrations
RUN python -m labeler_ui.vendor_assets \
    && pip wheel --no-deps --no-cache-dir --wheel-dir /wheels .

# --- runtime -----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
# torch goes in first, from the CPU index: the package's own "torch>=2.4" is then satisfied,
# where pip would otherwise pull the CUDA build and gigabytes of NVIDIA wheels from PyPI.
ARG TORCH_SPEC=torch==2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# pg_dump and pg_restore for `stepwise db backup|restore` (the README's nightly cron runs the
# backup in this container); bookworm's client is version 15, as the compose file's server.
# ASYMPTOTE=yes also installs Asymptote, which draws MATH's [asy] figures (with TeX, some
# hundreds of MB); without it they show as their source.
ARG ASYMPTOTE=no
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-client \
    && if [ "${ASYMPTOTE}" = yes ]; then apt-get install -y --no-install-recommends asymptote; fi \
    && rm -rf /var/lib/apt/lists/*
RUN pip install "${TORCH_SPEC}" --index-url "${TORCH_INDEX_URL}"
COPY --from=build /wheels /wheels
# The versions `make lock` pinned, as the README's install uses them (torch apart, above).
COPY constraints.txt /wheels/
RUN pip install -c /wheels/constraints.txt /wheels/*.whl && rm -rf /wheels

# Numeric, so that a runtime that refuses root (runAsNonRoot) can tell without /etc/passwd.
RUN useradd --create-home --uid 10001 --user-group stepwise
# Made here, so that the checkpoint volume mounted on it starts owned by the user, not root.
RUN install -d -o 10001 -g 10001 /home/stepwise/models
USER 10001:10001
WORKDIR /home/stepwise

EXPOSE 8000
CMD ["stepwise", "serve", "--host", "0.0.0.0", "--port", "8000", "--workers", "4"]
