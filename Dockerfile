# syntax=docker/dockerfile:1
#
# Strata: one static binary on a distroless base, running as a non-root user.
#
#   docker build -t strata .
#   docker run -p 8080:8080 \
#     -e STRATA_CATALOG='postgres://strata@db:5432/strata?sslmode=verify-full&sslrootcert=/etc/strata/ca.pem' \
#     -e PGPASSWORD=... \
#     -e STRATA_BUCKET=s3://my-bucket/strata \
#     -e STRATA_API_KEYS=... strata
#
# Configuration is by environment alone: every flag of `strata serve` is also read from
# STRATA_<FLAG> (see `docker run strata serve -h`). SIGTERM stops accepting requests,
# lets those in flight finish and drains the writer before exit (--shutdown-timeout,
# default 30s: give the orchestrator's stop grace period a little more). /readyz
# answers 200 only while the catalog and the bucket answer; /healthz only says the
# process serves.
#
# The same image runs on AWS Lambda as a container image (the binary answers the
# Lambda runtime API when AWS_LAMBDA_RUNTIME_API is set and no command is given: set
# the function's command to ["lambda"]).

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Amazon RDS's CA bundle, so that a catalog URL with sslmode=verify-full&sslrootcert=
# /etc/strata/rds-global-bundle.pem verifies an RDS or Aurora server (terraform's
# catalog_url does; RDS Proxy's public certificate needs only sslrootcert=system).
ADD --chmod=0444 https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem /out/rds-global-bundle.pem
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
# CGO_ENABLED=0: a static binary (the SQLite catalog is pure Go), so the final image
# needs no libc.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags="-s -w -X main.version=$VERSION" -o /out/strata ./cmd/strata

# distroless/static: CA certificates, tzdata and /etc/passwd with the nonroot user, and
# nothing else (no shell, no package manager).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/strata /usr/local/bin/strata
COPY --from=build /out/rds-global-bundle.pem /etc/strata/rds-global-bundle.pem
# 65532 is distroless's "nonroot"; numeric so Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
ENV STRATA_LISTEN=:8080 \
    STRATA_LOG_FORMAT=json
EXPOSE 8080
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/strata"]
CMD ["serve"]
