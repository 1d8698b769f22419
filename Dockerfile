# The operator image: `deno task compile` in the official Deno image, the single binary (with its
# permission set baked in) on distroless. Build arguments:
#   REGISTRY_HOSTS  registry hosts the binary may reach (comma-separated, default *.pkg.dev)
#   VERSION, REVISION, BUILT_AT  what --version prints
ARG DENO_VERSION=2.9.6

FROM denoland/deno:${DENO_VERSION} AS build
ARG REGISTRY_HOSTS=*.pkg.dev
ARG VERSION=dev
ARG REVISION=unknown
ARG BUILT_AT=unknown
WORKDIR /src
COPY deno.json deno.lock ./
RUN deno install --frozen
COPY . .
RUN REGISTRY_HOSTS="${REGISTRY_HOSTS}" VERSION="${VERSION}" REVISION="${REVISION}" \
    BUILT_AT="${BUILT_AT}" deno task compile

# distroless/cc: glibc and libgcc for the Deno runtime, CA certificates, no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/dist/cocoon-operator /usr/bin/cocoon-operator
# The allocator setting scripts/runtime_flags.ts gives the operator (its V8 flags are in the binary).
ENV MALLOC_ARENA_MAX=2
USER 65532:65532
ENTRYPOINT ["/usr/bin/cocoon-operator"]
