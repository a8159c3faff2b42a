# The lbplane image: a static binary on distroless, non-root. Built by users with a container engine:
#   docker build --build-arg REVISION=$(git rev-parse HEAD) -t ghcr.io/lbplane/lbplane:$(cat version/VERSION) .
# The version is version/VERSION, compiled in; the image has no .git, so the revision comes as an argument.
FROM golang:1.26 AS build
ARG REVISION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/lbplane/lbplane/version.revision=${REVISION}" -o /out/ ./cmd/lbplane ./cmd/lbctl ./cmd/lbplane-backend

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lbplane /out/lbctl /out/lbplane-backend /
USER 65532:65532
ENTRYPOINT ["/lbplane"]
