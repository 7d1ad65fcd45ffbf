# syntax=docker/dockerfile:1
# The goodput image: the `goodput` command on Debian slim, run as a non-root user, `goodput` as
# the entrypoint (`docker run IMAGE run --target http://…`). Also holds deploy/ci/goodput-ci, the
# CI steps (GitLab example: deploy/ci/gitlab-ci.yml). Build from the repository root:
#   docker build -t REGISTRY/goodput:0.1.0 --build-arg GOODPUT_GIT_SHA=$(git rev-parse --short=12 HEAD) .
# The Kubernetes guide (deploy/kubernetes/README.md) runs this image.

# Build stage: the Rust toolchain at the workspace's rust-version; SQLite (the `history` feature)
# and ring are compiled by the image's C compiler. The cache mounts keep crates.io downloads and
# target/ between builds (BuildKit).
FROM rust:1.90-bookworm AS build
WORKDIR /src
COPY . .
# .git is not in the build context (.dockerignore): the commit comes in as a build argument and
# is recorded in every report's tool section, as a build inside a checkout records it.
ARG GOODPUT_GIT_SHA=""
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    if [ -n "$GOODPUT_GIT_SHA" ]; then export GOODPUT_GIT_SHA; else unset GOODPUT_GIT_SHA; fi \
 && cargo build --release --locked -p goodput \
 && install -D -m 0755 target/release/goodput /out/goodput \
 && strip /out/goodput \
 && /out/goodput --version

# Runtime stage: glibc of the same Debian release, no toolchain, no shell tools beyond the base's
# (bash, for goodput-ci). TLS roots are compiled into goodput (webpki-roots); ca-certificates is
# there for anything else a CI job runs in the image.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 goodput \
 && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/goodput --shell /usr/sbin/nologin goodput
COPY --from=build /out/goodput /usr/local/bin/goodput
COPY --chmod=0755 deploy/ci/goodput-ci /usr/local/bin/goodput-ci
USER 10001:10001
WORKDIR /home/goodput
ENTRYPOINT ["/usr/local/bin/goodput"]
CMD ["--help"]
