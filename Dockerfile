# The operator image: `deno task compile` in the official Deno image, the single binary (with its
# permission set baked in) on distroless. Both base images are pinned by digest, so a rebuild
# uses exactly the bytes that were reviewed; a tag alone could move under the build. Build
# arguments:
#   DENO_IMAGE_DIGEST  sha256 digest of denoland/deno:${DENO_VERSION} (default below: the OCI
#                      index of 2.9.6; check a new one with
#                      `docker buildx imagetools inspect denoland/deno:<version>`)
#   BASE_IMAGE_DIGEST  sha256 digest of gcr.io/distroless/cc-debian12:nonroot (default below)
#   REGISTRY_HOSTS     registry hosts the binary may reach (comma-separated, default
#                      *.pkg.dev:443; an entry without a port gets :443)
#   PROXY_HOSTS        host:port of an HTTP(S) proxy the pod is given through HTTPS_PROXY and
#                      friends (default none: such a variable then stops the operator at start)
#   VERSION, REVISION, BUILT_AT  what --version prints
ARG DENO_VERSION=2.9.6
ARG DENO_IMAGE_DIGEST=sha256:2014dc167ece617ef7e7ba40631ac2234c59e75ce693e7cc2dc2602b3c87859d
ARG BASE_IMAGE_DIGEST=sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f

FROM denoland/deno:${DENO_VERSION}@${DENO_IMAGE_DIGEST} AS build
ARG REGISTRY_HOSTS=*.pkg.dev:443
ARG PROXY_HOSTS=
ARG VERSION=dev
ARG REVISION=unknown
ARG BUILT_AT=unknown
WORKDIR /src
COPY deno.json deno.lock ./
RUN deno install --frozen
COPY . .
RUN REGISTRY_HOSTS="${REGISTRY_HOSTS}" PROXY_HOSTS="${PROXY_HOSTS}" VERSION="${VERSION}" \
    REVISION="${REVISION}" BUILT_AT="${BUILT_AT}" deno task compile

# distroless/cc: glibc and libgcc for the Deno runtime, CA certificates, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot@${BASE_IMAGE_DIGEST}
COPY --from=build /src/dist/cocoon-operator /usr/bin/cocoon-operator
# The allocator setting scripts/runtime_flags.ts gives the operator (its V8 flags are in the binary).
ENV MALLOC_ARENA_MAX=2
USER 65532:65532
ENTRYPOINT ["/usr/bin/cocoon-operator"]
