#!/usr/bin/env bash
# Builds the Lambda deployment package: the strata binary, static, named bootstrap (the
# provided.al2023 runtime runs ./bootstrap, and strata answers the Lambda runtime API
# when started without arguments), zipped.
#
#   deploy/build-lambda.sh [arm64|amd64]     -> bin/strata-lambda-ARCH.zip
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${1:-arm64}
case "$ARCH" in
  arm64 | amd64) ;;
  x86_64) ARCH=amd64 ;;
  *) echo "usage: $0 [arm64|amd64]" >&2; exit 2 ;;
esac
mkdir -p bin
OUT=$PWD/bin/strata-lambda-$ARCH.zip
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# lambda.norpc drops aws-lambda-go's legacy RPC mode, which provided.al2023 never uses.
CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH go build -trimpath -tags lambda.norpc \
  -ldflags="-s -w -X main.version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}" \
  -o "$WORK/bootstrap" ./cmd/strata
rm -f "$OUT"
if command -v zip >/dev/null; then
  (cd "$WORK" && zip -q -9 "$OUT" bootstrap)
else
  (cd "$WORK" && python3 -c 'import zipfile,sys; z=zipfile.ZipFile(sys.argv[1],"w",zipfile.ZIP_DEFLATED); i=zipfile.ZipInfo("bootstrap"); i.external_attr=0o755<<16; i.compress_type=zipfile.ZIP_DEFLATED; z.writestr(i, open("bootstrap","rb").read()); z.close()' "$OUT")
fi
echo "$OUT"
