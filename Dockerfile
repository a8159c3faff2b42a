# The lbplane image: a static binary on distroless, non-root. Built by users with a container engine:
#   docker build -t ghcr.io/lbplane/lbplane:0.1.0 .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/ ./cmd/lbplane ./cmd/lbctl ./cmd/lbplane-backend

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lbplane /out/lbctl /out/lbplane-backend /
USER 65532:65532
ENTRYPOINT ["/lbplane"]
