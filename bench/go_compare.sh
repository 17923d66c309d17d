#!/usr/bin/env bash
# The document core against the Go original (godeviceshadow) in one run, on the same fixtures
# (bench/go_original/make_fixtures.py: 10, 100 and 1,000 timestamped sensors, half of them
# stale, a tenth acknowledging desired). Each round times the Go side (bench/go_original/main.go:
# parse into the typed model, merge with a change logger, acknowledge) and then shadowd's
# (bench_document --fixtures: parse-merge-acknowledge, and the full report that also serializes
# the result and renders the changes), and prints ns per report and the ratios Go / shadowd.
#
#   bench/go_compare.sh GODEVICESHADOW_CHECKOUT [rounds] [build dir]
#
# The checkout is not part of this repository. Its go.mod asks for Go 1.24 and for modules its
# tests use; Debian 12 has Go 1.23 (bookworm-backports, installed here when missing) and no
# module proxy is needed: the packages measured (merge, model, changelogger, vtsutils) use the
# standard library only, so a copy of the checkout is built with its go.mod lowered to 1.23.
set -euo pipefail
checkout=${1:?usage: bench/go_compare.sh GODEVICESHADOW_CHECKOUT [rounds] [build dir]}
rounds=${2:-3}
build=${3:-build/default}
cd "$(dirname "$0")/.."
checkout=$(cd "$checkout" && pwd)

go=/usr/lib/go-1.23/bin/go
if [ ! -x "$go" ]; then
  echo "go_compare: installing golang-1.23-go from bookworm-backports" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
    $SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq -t bookworm-backports golang-1.23-go >/dev/null
fi
cmake --build "$build" --target bench_document >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$checkout" "$work/godeviceshadow"
printf 'module github.com/mariotoffia/godeviceshadow\n\ngo 1.23\n' >"$work/godeviceshadow/go.mod"
rm -f "$work/godeviceshadow/go.sum"
cp -r bench/go_original "$work/harness"
export GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod GOCACHE="$work/cache" GOPATH="$work/gopath"
(cd "$work/harness" && "$go" mod edit -replace "github.com/mariotoffia/godeviceshadow=$work/godeviceshadow" &&
  "$go" build -o "$work/go_report" .)
python3 bench/go_original/make_fixtures.py "$work/fixtures"

echo "| round | leaves | Go original ns/report | shadowd parse-merge-acknowledge ns (Go / shadowd) | the same with the stored sections copied in | shadowd full report |"
echo "|---|---|---|---|---|---|"
for round in $(seq "$rounds"); do
  "$work/go_report" "$work/fixtures" >"$work/go.txt"
  "$build/bench/bench_document" --fixtures "$work/fixtures" >"$work/cpp.txt"
  join "$work/go.txt" "$work/cpp.txt" | sort -n | awk -v r="$round" \
    '{printf "| %s | %s | %d | %d (%.1f×) | %d (%.1f×) | %d (%.1f×) |\n", r, $1, $2, $5, $2/$5, $4, $2/$4, $3, $2/$3}'
done
