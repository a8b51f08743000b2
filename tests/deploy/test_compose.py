"""docker-compose.yml and the Dockerfile, read as files: no Docker engine runs here.

Compose interpolates `${VAR:-default}` in values after parsing the YAML; `_resolved` does the
same with the defaults and a stand-in password, so the checks see what `docker compose up`
would run.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent.parent
VARIABLE = re.compile(r"\$\{(\w+)(?::([-?])([^}]*))?\}")
PASSWORD = "s3cret"


def _interpolate(value: object) -> object:
    if isinstance(value, dict):
        return {key: _interpolate(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_interpolate(item) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, kind, default = match.groups()
        if name == "POSTGRES_PASSWORD":
            assert kind == "?", "the database password must be required, not defaulted"
            return PASSWORD
        assert kind == "-", f"${{{name}}} needs a default"
        return default

    return VARIABLE.sub(substitute, value)


@pytest.fixture(scope="module")
def compose() -> dict:  # type: ignore[type-arg]
    return _interpolate(yaml.safe_load((ROOT / "docker-compose.yml").read_text()))  # type: ignore[return-value]


@pytest.fixture(scope="module")
def services(compose: dict) -> dict:  # type: ignore[type-arg]
    return compose["services"]


def _command(service: dict) -> list[str]:  # type: ignore[type-arg]
    command = service["command"]
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]


def _option(command: list[str], name: str) -> str:
    assert name in command, f"{name} missing from {command}"
    return command[command.index(name) + 1]


def test_postgres_keeps_its_data_in_a_named_volume_and_reports_health(compose, services):  # type: ignore[no-untyped-def]
    postgres = services["postgres"]
    assert postgres["image"].split(":")[1].startswith("15")
    volume, _, target = postgres["volumes"][0].partition(":")
    assert target == "/var/lib/postgresql/data"
    assert volume in compose["volumes"], "the data volume must be named, not a bind mount"
    health = postgres["healthcheck"]
    assert "pg_isready" in " ".join(health["test"])
    assert health["retries"] >= 3


def test_migrations_run_once_after_postgres_is_healthy(services):  # type: ignore[no-untyped-def]
    migrate = services["migrate"]
    assert _command(migrate) == ["stepwise", "db", "upgrade"]
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert migrate.get("restart", "no") == "no", "a one-shot job must not be restarted"


def test_api_starts_only_after_migrations_succeeded_with_several_workers(services):  # type: ignore[no-untyped-def]
    api = services["api"]
    assert api["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert api["depends_on"]["postgres"]["condition"] == "service_healthy"
    command = _command(api)
    assert command[:2] == ["stepwise", "serve"]
    assert _option(command, "--host") == "0.0.0.0"
    port = _option(command, "--port")
    assert int(_option(command, "--workers")) >= 2
    assert any(str(mapping).endswith(f":{port}") for mapping in api["ports"])
    # Published on the host's loopback unless asked otherwise: a proxy on the host fronts it.
    assert all(str(mapping).startswith("127.0.0.1:") for mapping in api["ports"])


def test_app_services_reach_the_compose_database(services):  # type: ignore[no-untyped-def]
    database = services["postgres"]["environment"]
    for name in ("migrate", "api", "worker", "worker-gpu"):
        service = services[name]
        if name != "worker-gpu":
            assert service["image"] == services["api"]["image"], "one image for every CPU app service"
        url = make_url(service["environment"]["DATABASE_URL"])
        assert url.get_backend_name() == "postgresql"
        assert (url.host, url.port) == ("postgres", 5432)
        assert url.username == database["POSTGRES_USER"]
        assert url.password == database["POSTGRES_PASSWORD"] == PASSWORD
        assert url.database == database["POSTGRES_DB"]
        assert service["environment"]["STEPWISE_ENV"] == "production"


def test_the_api_believes_forwarded_addresses_only_from_a_proxy_it_is_told_of(services):  # type: ignore[no-untyped-def]
    # The login throttle counts per client address: a proxy's X-Forwarded-For must be believable,
    # and only from the proxy (uvicorn reads FORWARDED_ALLOW_IPS).
    assert services["api"]["environment"]["FORWARDED_ALLOW_IPS"] == "127.0.0.1"


def test_api_reports_its_liveness_through_healthz(services):  # type: ignore[no-untyped-def]
    api = services["api"]
    health = api["healthcheck"]
    probe = " ".join(health["test"])
    port = _option(_command(api), "--port")
    assert f"127.0.0.1:{port}/healthz" in probe
    # The image is python:3.11-slim, without curl or wget: the probe is Python's urlopen,
    # which raises (a failed check) on any status past 399.
    assert health["test"][:2] == ["CMD", "python"]
    assert "urlopen" in probe
    assert health["retries"] >= 2
    assert "start_period" in health


@pytest.mark.parametrize("name", ["worker", "worker-gpu"])
def test_workers_run_rounds_after_migrations_and_come_back(services, name):  # type: ignore[no-untyped-def]
    worker = services[name]
    command = _command(worker)
    assert command[:2] == ["stepwise", "worker"]
    # Its round metrics, for Prometheus in the compose network, and what its healthcheck reads.
    port = _option(command, "--metrics-port")
    assert _option(command, "--metrics-host") == "0.0.0.0"
    assert f"127.0.0.1:{port}/metrics" in " ".join(worker["healthcheck"]["test"])
    assert worker["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert worker["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert worker["restart"] in ("on-failure", "unless-stopped")
    assert "ports" not in worker, "the worker serves nothing"


def test_the_cpu_worker_starts_by_default_and_the_gpu_one_only_with_its_profile(services):  # type: ignore[no-untyped-def]
    assert not services["worker"].get("profiles")
    assert services["worker-gpu"]["profiles"] == ["gpu"]
    for name, service in services.items():
        if name != "worker-gpu":
            assert not service.get("profiles"), f"{name} must start without a profile"


def test_the_gpu_worker_reserves_one_nvidia_gpu_and_builds_cuda_torch(services, dockerfile):  # type: ignore[no-untyped-def]
    gpu = services["worker-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    index = gpu["build"]["args"]["TORCH_INDEX_URL"]
    assert "/whl/cu" in index, "the GPU image needs PyTorch's CUDA build"
    declared = {line.split()[1].split("=")[0] for line in dockerfile if line.startswith("ARG ")}
    assert set(gpu["build"]["args"]) <= declared, "a build arg the Dockerfile does not declare is ignored"
    assert gpu["image"] != services["worker"]["image"], "the CUDA image must not replace the CPU one"


def test_readme_documents_the_workers_and_the_gpu_profile():
    deployment = (ROOT / "README.md").read_text().split("## Deployment", 1)[1].split("\n## ", 1)[0]
    for needle in ("`worker`", "`worker-gpu`", "--profile gpu", "--scale worker=0", "/healthz"):
        assert needle in deployment, f"README's Deployment section does not mention {needle}"


def test_every_service_runs_something_real(services):  # type: ignore[no-untyped-def]
    for name, service in services.items():
        assert "image" in service or "build" in service, name
        if name != "postgres":
            assert _command(service)[0] == "stepwise", f"{name} runs no stepwise command"


@pytest.fixture(scope="module")
def dockerfile() -> list[str]:
    lines, pending = [], ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    return lines


def _stages(lines: list[str]) -> list[list[str]]:
    stages: list[list[str]] = []
    for line in lines:
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


def test_image_is_python_311_slim(dockerfile):  # type: ignore[no-untyped-def]
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in dockerfile
    assert all(stage[0].split()[1] == "${PYTHON_IMAGE}" for stage in _stages(dockerfile))


def test_build_stage_vendors_katex_into_the_wheel(dockerfile):  # type: ignore[no-untyped-def]
    build = _stages(dockerfile)[0]
    text = "\n".join(build)
    assert "nodejs" in text and "npm" in text
    vendor = text.index("python -m labeler_ui.vendor_assets")
    assert vendor < text.index("pip wheel"), "KaTeX must be in place before the wheel is built"


def test_runtime_installs_cpu_torch_before_the_package(dockerfile):  # type: ignore[no-untyped-def]
    runtime = _stages(dockerfile)[-1]
    torch = next(i for i, line in enumerate(runtime) if '"${TORCH_SPEC}"' in line)
    assert "--index-url" in runtime[torch]
    assert any(line.startswith("ARG TORCH_SPEC=") for line in runtime[:torch])
    assert any(line.startswith("ARG TORCH_INDEX_URL=") and line.endswith("/cpu") for line in runtime)
    package = next(i for i, line in enumerate(runtime) if line.startswith("RUN pip install") and "/wheels/*.whl" in line)
    assert torch < package
    assert not any("npm" in line or "nodejs" in line for line in runtime)


def test_runtime_runs_as_a_non_root_user_and_serves_port_8000(dockerfile):  # type: ignore[no-untyped-def]
    runtime = _stages(dockerfile)[-1]
    users = [line.split()[1] for line in runtime if line.startswith("USER ")]
    assert users, "the image must not run as root"
    assert users[-1].split(":")[0] not in ("root", "0")
    assert "EXPOSE 8000" in runtime
    cmd = next(line for line in runtime if line.startswith("CMD "))
    assert '"stepwise", "serve"' in cmd and '"0.0.0.0"' in cmd


def test_everything_the_build_copies_exists(dockerfile):  # type: ignore[no-untyped-def]
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    for line in dockerfile:
        parts = line.split()
        if parts[0] != "COPY" or any(p.startswith("--from") for p in parts):
            continue
        for source in parts[1:-1]:
            assert (ROOT / source).exists(), f"the build copies {source}, which is missing"
            assert source not in ignored, f"{source} is copied but left out of the context"
    for made_in_the_build in (".venv", ".git", "labeler_ui/static/vendor", "stepwise.db*"):
        assert made_in_the_build in ignored


def test_the_api_reads_the_checkpoints_the_workers_write(compose, services, dockerfile):  # type: ignore[no-untyped-def]
    # Each container's own ./models held only what it wrote: the API found no checkpoint to score with.
    mounts = set()
    for name in ("api", "worker", "worker-gpu"):
        models_dir = services[name]["environment"]["STEPWISE_MODELS_DIR"]
        mount = next(m for m in services[name]["volumes"] if m.endswith(f":{models_dir}"))
        mounts.add(mount)
    (mount,) = mounts
    assert mount.partition(":")[0] in compose["volumes"], "a named volume, shared by all of them"
    # A volume starts with the ownership of the image's folder: made by root, the user could not write it.
    user = next(line.split()[1] for line in reversed(_stages(dockerfile)[-1]) if line.startswith("USER "))
    made = f"install -d -o {user.split(':')[0]} -g {user.split(':')[1]} {mount.partition(':')[2]}"
    assert any(made in line for line in _stages(dockerfile)[-1])


def test_the_image_can_back_the_database_up(dockerfile):  # type: ignore[no-untyped-def]
    # `stepwise db backup` runs pg_dump inside the api container (the README's nightly cron).
    assert any("postgresql-client" in line for line in dockerfile)


def test_every_build_arg_is_one_the_dockerfile_declares(services, dockerfile):  # type: ignore[no-untyped-def]
    declared = {line.split()[1].split("=")[0] for line in dockerfile if line.startswith("ARG ")}
    for name, service in services.items():
        build = service.get("build")
        if isinstance(build, dict):
            assert set(build.get("args", {})) <= declared, f"{name} passes a build arg the Dockerfile ignores"
    assert services["api"]["build"]["args"]["ASYMPTOTE"] == "no", "figures are drawn only when asked"
    assert any('"${ASYMPTOTE}" = yes' in line and "asymptote" in line for line in dockerfile)


def test_every_setting_an_operator_writes_into_env_reaches_the_stepwise_containers(services, monkeypatch):  # type: ignore[no-untyped-def]
    from app.config import Settings
    from app.rounds.config import WorkerSettings

    for name in ("migrate", "api", "worker", "worker-gpu"):
        assert services[name]["env_file"] == [{"path": ".env", "required": False}], name
    # What the compose file sets itself are settings Stepwise reads, valid as they stand.
    known = {field.alias for field in Settings.model_fields.values()} | {"DATABASE_URL", "FORWARDED_ALLOW_IPS"} | {
        f"STEPWISE_{name.upper()}" for name in WorkerSettings.model_fields}
    environment = services["api"]["environment"]
    assert set(environment) <= known, f"not settings Stepwise reads: {set(environment) - known}"
    for name, value in environment.items():
        monkeypatch.setenv(name, str(value))
    assert Settings().environment == "production"
    assert WorkerSettings().models_dir.as_posix() == "/home/stepwise/models"


def test_the_operators_settings_stay_out_of_the_image_and_the_repository():
    for ignore in (".dockerignore", ".gitignore"):
        assert ".env" in (ROOT / ignore).read_text().split("\n"), ignore
