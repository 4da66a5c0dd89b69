#!/usr/bin/env bash
# PgBouncer 1.24.1 built from Debian's own source (trixie's orig tarball), for the CI stage that
# runs through a PgBouncer which keeps protocol-level prepared statements in transaction mode
# (max_prepared_statements, 1.21 on). Debian bookworm's package is 1.18, which cannot.
#
#   scripts/pgbouncer_build.sh      # prints the path of the built pgbouncer binary
#
# The tarball is fetched from deb.debian.org and checked against the sha256 pinned below
# (Debian's .dsc lists the same one); a mismatch stops here. The build goes to
# ${XDG_CACHE_HOME:-~/.cache}/acurio/pgbouncer-1.24.1 and is reused when that binary reports
# its version. Build dependencies (libevent, OpenSSL, c-ares headers; pkg-config, gcc, make)
# are installed with apt when missing. No PAM, no systemd: neither is needed here.
# All messages go to stderr; stdout is the binary's path only.
set -euo pipefail

version=1.24.1
sha256=da72a3aba13072876d055a3e58dd4aba4a5de4ed6148e73033185245598fd3e0
url="http://deb.debian.org/debian/pool/main/p/pgbouncer/pgbouncer_${version}.orig.tar.gz"
prefix="${PGBOUNCER_BUILD_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/acurio/pgbouncer-$version}"
binary="$prefix/bin/pgbouncer"

say() { echo "pgbouncer_build: $*" >&2; }

if [ -x "$binary" ] && "$binary" --version 2>/dev/null | grep -q "^PgBouncer $version\b"; then
  echo "$binary"
  exit 0
fi

missing=()
for package in libevent-dev libssl-dev libc-ares-dev pkg-config gcc make; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing ${missing[*]}"
  log="$(mktemp)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1 ||
    { tail -n 30 "$log" >&2; rm -f "$log"; exit 1; }
  rm -f "$log"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tarball="$work/pgbouncer_${version}.orig.tar.gz"
say "downloading $url"
curl -fsSL --retry 3 -o "$tarball" "$url"
echo "$sha256  $tarball" | sha256sum -c --status - || {
  say "sha256 mismatch for $url: expected $sha256, got $(sha256sum "$tarball" | cut -d' ' -f1)"
  exit 1
}
tar -xzf "$tarball" -C "$work"
src="$work/pgbouncer-$version"
[ -d "$src" ] || { say "the tarball holds no pgbouncer-$version directory"; exit 1; }

say "building into $prefix"
started=$SECONDS
(
  cd "$src"
  # The release tarball ships its man pages: no pandoc needed.
  ./configure --prefix="$prefix" --without-pam --without-systemd --with-cares >"$work/configure.log" 2>&1 ||
    { tail -n 30 "$work/configure.log" >&2; exit 1; }
  make -j"$(nproc)" >"$work/make.log" 2>&1 || { tail -n 30 "$work/make.log" >&2; exit 1; }
  rm -rf "$prefix"
  make install >"$work/install.log" 2>&1 || { tail -n 30 "$work/install.log" >&2; exit 1; }
)
"$binary" --version | head -n1 | grep -q "^PgBouncer $version\b" ||
  { say "the built binary does not report PgBouncer $version"; exit 1; }
say "built in $((SECONDS - started)) s"
echo "$binary"
