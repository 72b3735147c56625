# Shared by scripts/try, scripts/test and .ci/run (sourced, not run): what a fresh Debian
# (12 or later) machine lacks, installed as root or through sudo, and the Rust toolchain.

# as_root CMD...: runs CMD as root: directly when this is root, else through sudo.
as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "redlock: $1 needs root, and sudo is not installed; run this as root" >&2
        exit 77
    fi
}

# apt_install PACKAGE...: installs the packages, without recommends, quietly.
apt_install() {
    [ "$#" -gt 0 ] || return 0
    echo "redlock: installing with apt-get: $*" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# ensure_rust: cargo on PATH, from rustup (the user's own ~/.cargo) when there is none.
# Debian's own rustc is older than the rust-version Cargo.toml asks for.
ensure_rust() {
    if ! command -v cargo >/dev/null 2>&1 && [ -f "$HOME/.cargo/env" ]; then
        . "$HOME/.cargo/env"
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        local need=()
        command -v curl >/dev/null 2>&1 || need+=(curl ca-certificates)
        apt_install "${need[@]}"
        echo "redlock: installing the Rust toolchain with rustup into ~/.cargo" >&2
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs |
            sh -s -- -y --profile minimal --component rustfmt,clippy >&2
        . "$HOME/.cargo/env"
    fi
}
