# Build the manager binary.
FROM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH

WORKDIR /workspace
# Dependencies first, so that source changes do not refetch them.
COPY go.mod go.sum ./
RUN go mod download

COPY cmd/manager/ cmd/manager/
COPY api/ api/
COPY agents/ agents/
COPY controllers/ controllers/

# A static binary: no libc in the final image.
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} go build -trimpath -ldflags="-s -w" -o manager ./cmd/manager

# Distroless static, running as a non-root user.
FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /workspace/manager .
USER 65532:65532

ENTRYPOINT ["/manager"]
