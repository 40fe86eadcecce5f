#!/bin/sh
# Installs the agent-bridge binary from a release archive, without Go:
#
#   curl -fsSL https://github.com/agent-bridge/agent-bridge/releases/latest/download/install.sh | sh
#   sh install.sh [--prefix DIR] [--version X.Y.Z]
#
# It picks the archive for this OS and processor, checks it against the
# release's checksums.txt, and puts the binary in PREFIX/bin (default
# ~/.local, so ~/.local/bin/agent-bridge). AGENT_BRIDGE_DOWNLOAD_URL replaces
# the address the archive and checksums.txt are fetched from (a mirror, or a
# test server); AGENT_BRIDGE_VERSION pins a release like --version does.
# POSIX sh, with curl or wget, tar, and sha256sum or shasum.
set -eu

repo_url="https://github.com/agent-bridge/agent-bridge"
prefix="${HOME:?HOME is not set}/.local"
version="${AGENT_BRIDGE_VERSION:-}"

# fail prints one sentence and stops.
fail() {
	printf 'agent-bridge install: %s\n' "$1" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case "$1" in
	--prefix) [ $# -ge 2 ] || fail "--prefix needs a folder, for example --prefix /usr/local."; prefix="$2"; shift 2 ;;
	--prefix=*) prefix="${1#--prefix=}"; shift ;;
	--version) [ $# -ge 2 ] || fail "--version needs a release, for example --version 1.0.0."; version="$2"; shift 2 ;;
	--version=*) version="${1#--version=}"; shift ;;
	-h | --help)
		printf 'usage: install.sh [--prefix DIR] [--version X.Y.Z]\ninstalls agent-bridge into DIR/bin (default ~/.local/bin); AGENT_BRIDGE_DOWNLOAD_URL overrides where it downloads from.\n'
		exit 0 ;;
	*) fail "unknown option $1; the options are --prefix DIR and --version X.Y.Z." ;;
	esac
done
[ -n "$prefix" ] || fail "--prefix needs a folder, for example --prefix /usr/local."
version="${version#v}"

# The release names archives agent-bridge_OS_ARCH.tar.gz, as GoReleaser's
# config (.goreleaser.yaml) writes them.
os=$(uname -s)
arch=$(uname -m)
case "$os" in
Linux) goos=linux ;;
Darwin) goos=darwin ;;
*) goos="" ;;
esac
case "$arch" in
x86_64 | amd64) goarch=amd64 ;;
aarch64 | arm64) goarch=arm64 ;;
*) goarch="" ;;
esac
if [ -z "$goos" ] || [ -z "$goarch" ]; then
	fail "there is no agent-bridge release for $os $arch (only Linux and macOS on x86_64 and arm64); build it from source with: go install github.com/agent-bridge/agent-bridge/cmd/agent-bridge@latest"
fi
archive="agent-bridge_${goos}_${goarch}.tar.gz"

if [ -n "${AGENT_BRIDGE_DOWNLOAD_URL:-}" ]; then
	base="${AGENT_BRIDGE_DOWNLOAD_URL%/}"
elif [ -n "$version" ]; then
	base="$repo_url/releases/download/v$version"
else
	base="$repo_url/releases/latest/download"
fi

if command -v curl >/dev/null 2>&1; then
	fetch() { curl -fsSL --retry 2 -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
	fetch() { wget -q -O "$2" "$1"; }
else
	fail "neither curl nor wget is installed; install one of them and run this again."
fi
if command -v sha256sum >/dev/null 2>&1; then
	sha256() { sha256sum "$1" | cut -d ' ' -f 1; }
elif command -v shasum >/dev/null 2>&1; then
	sha256() { shasum -a 256 "$1" | cut -d ' ' -f 1; }
else
	fail "neither sha256sum nor shasum is installed, so the download cannot be checked; install one of them and run this again."
fi

tmp=$(mktemp -d 2>/dev/null || mktemp -d -t agent-bridge)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

printf 'Downloading %s/%s\n' "$base" "$archive"
fetch "$base/$archive" "$tmp/$archive" || fail "could not download $base/$archive."
fetch "$base/checksums.txt" "$tmp/checksums.txt" || fail "could not download $base/checksums.txt."

want=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1; exit }' "$tmp/checksums.txt")
[ -n "$want" ] || fail "checksums.txt from $base has no line for $archive, so it cannot be checked; nothing was installed."
have=$(sha256 "$tmp/$archive")
[ "$have" = "$want" ] || fail "the checksum of $archive does not match checksums.txt (got $have, want $want); the download is damaged or altered, and nothing was installed."

mkdir "$tmp/x"
tar -xzf "$tmp/$archive" -C "$tmp/x" || fail "could not unpack $archive."
[ -f "$tmp/x/agent-bridge" ] || fail "$archive holds no agent-bridge binary; nothing was installed."

bindir="$prefix/bin"
mkdir -p "$bindir" || fail "could not create $bindir; choose another folder with --prefix."
# Copy beside the target, then rename: a running agent-bridge keeps its
# old file, and a half-copied binary is never on PATH.
cp "$tmp/x/agent-bridge" "$bindir/.agent-bridge.new" || fail "could not write to $bindir; choose another folder with --prefix."
chmod 0755 "$bindir/.agent-bridge.new"
mv -f "$bindir/.agent-bridge.new" "$bindir/agent-bridge" || fail "could not write $bindir/agent-bridge."

installed=$("$bindir/agent-bridge" version 2>/dev/null || true)
printf 'Installed %s: %s\n' "$bindir/agent-bridge" "${installed:-agent-bridge}"
case ":$PATH:" in
*":$bindir:"*) cmd=agent-bridge ;;
*)
	cmd="$bindir/agent-bridge"
	# shellcheck disable=SC2016 # $PATH is for the reader's shell to expand.
	printf '%s is not on your PATH; add it (export PATH="%s:$PATH"), or run the binary by its full path.\n' "$bindir" "$bindir" ;;
esac
printf '\nNext, run the bridge, the coordinator and the web UI in this terminal:\n  %s up\nor keep the bridge running as a user service:\n  %s service install serve\n' "$cmd" "$cmd"
