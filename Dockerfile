# Odradek container image: a Kafka-protocol dev/test broker.
#   docker build -t odradek .
#   podman build --format docker -t odradek .   # podman's default OCI format drops HEALTHCHECK
#   docker run -p 9092:9092 -p 8081:8081 -p 127.0.0.1:8080:8080 odradek
#       # clients use localhost:9092 (registry: localhost:8081; console: http://localhost:8080/)
# Configure with KAFKA_* variables (official Kafka image convention), e.g.
#   -e KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://broker:9092 -e KAFKA_OFFSETS_RETENTION_MINUTES=60
# The test control endpoint is off; -e KAFKA_ODRADEK_CONTROL_LISTENER=9644 -p 127.0.0.1:9644:9644 turns
# it on, bound to every interface of the container (loopback there is unreachable through -p).
# The schema registry (Confluent's REST API, docs/SCHEMA_REGISTRY.md) listens on 8081 of every
# interface: -p 127.0.0.1:8081:8081 and clients use http://localhost:8081; empty turns it off:
#   -e KAFKA_ODRADEK_SCHEMA_REGISTRY_LISTENER=
# The web console listens on 8080 of every interface of the container (loopback there is unreachable
# through -p): publish it on the host's loopback, -p 127.0.0.1:8080:8080, and open http://localhost:8080/;
# -e KAFKA_ODRADEK_CONSOLE_LISTENER= turns it off, KAFKA_ODRADEK_CONSOLE_READ_ONLY=true makes it read-only.
# BASE_IMAGE picks another Python 3.11+ image (with venv) to build on, e.g. one made locally
# where no registry is reachable (scripts/container.sh does that).

ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY constraints.txt pyproject.toml README.md ./
COPY odradek ./odradek
# runtime dependencies at the versions the tests ran against (constraints.txt, shared with CI);
# pip and setuptools (9 MB) are not needed at run time; the .pyc files stay (the user can't write them there,
# and compiling on every start would slow it); importing what a start imports writes the compiled
# dataclass methods beside them (odradek/protocol/lean_dataclass.py), for the same reason
RUN python3 -m venv /opt/odradek \
    && /opt/odradek/bin/pip install --no-cache-dir --constraint constraints.txt . \
    && /opt/odradek/bin/python -c "import odradek.broker.cli, odradek.broker.app, odradek.broker.schema_registry" \
    && /opt/odradek/bin/pip uninstall --yes setuptools pip

FROM ${BASE_IMAGE}
# one user and one group, both 10001: files in the data dir belong to 10001:10001, and a bind
# mount must be chowned to that pair (see docs/running.md)
RUN groupadd --system --gid 10001 odradek \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/odradek odradek \
    && mkdir -p /var/lib/odradek \
    && chown 10001:10001 /var/lib/odradek
COPY --from=build /opt/odradek /opt/odradek
ENV PATH=/opt/odradek/bin:$PATH \
    KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    KAFKA_LOG_DIRS=/var/lib/odradek \
    KAFKA_LOG_FORMAT=json \
    KAFKA_ODRADEK_CONTROL_HOST=0.0.0.0 \
    KAFKA_ODRADEK_SCHEMA_REGISTRY_LISTENER=http://0.0.0.0:8081 \
    KAFKA_ODRADEK_CONSOLE_LISTENER=http://0.0.0.0:8080 \
    PYTHONUNBUFFERED=1
VOLUME ["/var/lib/odradek"]
EXPOSE 9092 8080 8081
USER 10001:10001
# probes the listener the broker recorded in its data dir, however it was configured; gives up
# before the engine's own timeout, so a hung broker reads "unhealthy", not "check timed out"
HEALTHCHECK --interval=5s --timeout=5s --start-period=5s --retries=3 CMD ["odradek", "health", "--timeout", "3"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["odradek", "serve"]
