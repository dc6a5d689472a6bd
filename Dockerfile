# Odradek container image: a Kafka-protocol dev/test broker.
#   docker build -t odradek .
#   docker run -p 9092:9092 odradek        # clients use localhost:9092
# Configure with KAFKA_* variables (official Kafka image convention), e.g.
#   -e KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://broker:9092 -e KAFKA_OFFSETS_RETENTION_MINUTES=60

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY odradek ./odradek
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --system --uid 10001 --no-create-home --home-dir /var/lib/odradek odradek \
    && mkdir -p /var/lib/odradek \
    && chown odradek:odradek /var/lib/odradek
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
ENV KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 \
    KAFKA_LOG_DIRS=/var/lib/odradek \
    KAFKA_LOG_FORMAT=json \
    PYTHONUNBUFFERED=1
VOLUME ["/var/lib/odradek"]
EXPOSE 9092
USER 10001:10001
HEALTHCHECK --interval=5s --timeout=5s --start-period=5s --retries=3 CMD ["odradek", "health"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["odradek", "serve"]
