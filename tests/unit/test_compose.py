"""docker-compose.yml cannot run here (no Docker engine), so its structure is checked: every
service the pipeline needs, health checks, restart policies, the migration before the workers,
and settings passed through from .env."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parents[2]


def _compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def test_the_services_of_the_pipeline_are_there() -> None:
    services = _compose()["services"]
    assert set(services) >= {"postgres", "redis", "migrate", "worker", "beat", "api"}
    assert services["migrate"]["command"] == ["sgam", "db", "upgrade"]
    assert services["worker"]["command"][:2] == ["sgam", "worker"]
    assert services["beat"]["command"][:2] == ["sgam", "beat"]
    assert services["api"]["command"][:2] == ["sgam", "serve"]


def test_long_running_services_have_health_checks_and_restart() -> None:
    services = _compose()["services"]
    for name in ("postgres", "redis", "worker", "beat", "api"):
        assert "healthcheck" in services[name], name
        assert services[name]["restart"] == "unless-stopped", name
    assert services["migrate"]["restart"] == "no"


def test_workers_and_the_api_start_after_the_migration_and_healthy_stores() -> None:
    for name in ("worker", "api"):
        depends = _compose()["services"][name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully"
        assert depends["postgres"]["condition"] == "service_healthy"
        assert depends["redis"]["condition"] == "service_healthy"


def test_the_api_listens_on_all_interfaces_and_is_ready_when_readyz_says_so() -> None:
    api = _compose()["services"]["api"]
    command = api["command"]
    assert command[command.index("--host") + 1] == "0.0.0.0"
    port = command[command.index("--port") + 1]
    assert api["ports"] == [f"{port}:{port}"]
    probe = " ".join(api["healthcheck"]["test"])
    assert f"127.0.0.1:{port}/readyz" in probe
    # The same settings as the workers: one anchor, one environment.
    assert api["environment"] == _compose()["services"]["worker"]["environment"]
    assert "EXPOSE 8080" in (ROOT / "Dockerfile").read_text()


def test_the_stores_are_published_on_loopback_only_and_the_catalogue_is_mounted() -> None:
    services = _compose()["services"]
    assert services["postgres"]["ports"] == ["127.0.0.1:${SGAM_POSTGRES_PORT:-5432}:5432"]
    assert services["redis"]["ports"] == ["127.0.0.1:${SGAM_REDIS_PORT:-6379}:6379"]
    example = (ROOT / ".env.example").read_text()
    mounted = example.split("SGAM_CATALOG_PATH=")[1].split()[0]
    for name in ("migrate", "worker", "beat", "api"):
        volumes = services[name]["volumes"]
        assert any(v.endswith(":" + str(Path(mounted).parent) + ":ro") for v in volumes), name


def test_the_beat_health_check_finds_the_schedule_whatever_dbm_names_it() -> None:
    probe = " ".join(_compose()["services"]["beat"]["healthcheck"]["test"])
    command = _compose()["services"]["beat"]["command"]
    schedule = command[command.index("--schedule") + 1]
    assert f"-name '{Path(schedule).name}*'" in probe
    assert str(Path(schedule).parent) in probe


def test_settings_come_from_env_and_point_at_the_services() -> None:
    services = _compose()["services"]
    for name in ("migrate", "worker", "beat", "api"):
        service = services[name]
        assert service["env_file"] == [{"path": ".env", "required": False}]
        environment = service["environment"]
        assert environment["SGAM_DATABASE_URL"].startswith("postgresql://sgam:sgam@postgres:5432/")
        assert environment["SGAM_BROKER_URL"].startswith("redis://redis:6379/")
    example = (ROOT / ".env.example").read_text()
    assert "SGAM_LLM_BASE_URL=" in example
    image = (ROOT / "Dockerfile").read_text()
    for package in ("pipeline", "schemas", "workers", "prompts"):
        assert f"COPY {package} ./{package}" in image
