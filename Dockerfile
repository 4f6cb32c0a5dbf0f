# The arbiter image: `arbiter serve` by default, its state on the volume
# /var/lib/arbiter; the same image runs `arbiter kube` (deploy/deployment.yaml
# gives `kube ...` as its arguments).
#
#   docker build --build-arg VERSION=$(git describe --tags --always) --build-arg COMMIT=$(git rev-parse --short=12 HEAD) -t arbiter .
#   docker run -d -p 7070:7070 -v arbiter-data:/var/lib/arbiter arbiter
#   docker run ... arbiter serve --listen 0.0.0.0:7070 --config /etc/arbiter/fleet.yaml   # with flags
#
# The binary is static (CGO_ENABLED=0): serve and kube need no cgo; only the
# agent's NVML inventory does (scripts/release.sh with NVML=1).

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/arbiterhq/arbiter/internal/cli.Version=${VERSION} -X github.com/arbiterhq/arbiter/internal/cli.Commit=${COMMIT}" \
      -o /out/arbiter ./cmd/arbiter \
 && /out/arbiter version \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/arbiter /usr/local/bin/arbiter
COPY --from=build --chown=65532:65532 /out/data /var/lib/arbiter
COPY LICENSE NOTICE /usr/share/doc/arbiter/
# nonroot: uid and gid 65532, as deploy/deployment.yaml's runAsUser.
USER 65532:65532
ENV ARBITER_DATA=/var/lib/arbiter
VOLUME /var/lib/arbiter
EXPOSE 7070
ENTRYPOINT ["/usr/local/bin/arbiter"]
CMD ["serve", "--listen", "0.0.0.0:7070"]
