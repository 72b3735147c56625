# Shared by scripts/build-deb and scripts/build-rpm (sourced, not run): the command line, the
# target and its architecture names, the binary, and the files both packages install.
#
# The architecture is the target's, never the build host's: a package is labelled with what
# its binary runs on, and a binary whose ELF header names another machine is refused (65).

# usage_and_exit NAME: the one-line usage, status 64.
usage_and_exit() {
    echo "redlock: usage: scripts/$1 [--target TRIPLE] [--binary PATH] [--out DIR]" >&2
    exit 64
}

# parse_args NAME ARGS...: sets target, binary and out.
parse_args() {
    local name=$1
    shift
    target=""
    binary=""
    out=""
    while [ $# -gt 0 ]; do
        case "$1" in
            --target) [ $# -ge 2 ] || usage_and_exit "$name"; target=$2; shift 2 ;;
            --binary) [ $# -ge 2 ] || usage_and_exit "$name"; binary=$2; shift 2 ;;
            --out) [ $# -ge 2 ] || usage_and_exit "$name"; out=$2; shift 2 ;;
            *) usage_and_exit "$name" ;;
        esac
    done
    # The target cargo builds for: --target, then CARGO_BUILD_TARGET, then .cargo/config.toml's
    # [build] target, then the host.
    if [ -z "$target" ]; then target=${CARGO_BUILD_TARGET:-}; fi
    if [ -z "$target" ]; then
        target=$(sed -n '/^\[build\]/,/^\[/s/^target *= *"\(.*\)"$/\1/p' .cargo/config.toml 2>/dev/null | head -n 1)
    fi
    if [ -z "$target" ]; then target=$(rustc -vV | sed -n 's/^host: //p'); fi
    arch_names "$target"
}

# arch_names TRIPLE: sets deb_arch, rpm_arch and elf_machine (e_machine of its binaries).
arch_names() {
    case "$1" in
        x86_64-*) deb_arch=amd64; rpm_arch=x86_64; elf_machine=62 ;;
        aarch64-*) deb_arch=arm64; rpm_arch=aarch64; elf_machine=183 ;;
        armv7-*hf) deb_arch=armhf; rpm_arch=armv7hl; elf_machine=40 ;;
        i686-* | i586-*) deb_arch=i386; rpm_arch=i686; elf_machine=3 ;;
        riscv64*) deb_arch=riscv64; rpm_arch=riscv64; elf_machine=243 ;;
        powerpc64le-*) deb_arch=ppc64el; rpm_arch=ppc64le; elf_machine=21 ;;
        s390x-*) deb_arch=s390x; rpm_arch=s390x; elf_machine=22 ;;
        loongarch64-*) deb_arch=loong64; rpm_arch=loongarch64; elf_machine=258 ;;
        *) echo "redlock: no package architecture is known for the target $1" >&2; exit 64 ;;
    esac
}

# elf_machine_of FILE: prints e_machine from the ELF header (either byte order), or nothing.
elf_machine_of() {
    local magic order lo hi
    magic=$(od -An -c -N 4 "$1" 2>/dev/null | tr -d ' ')
    [ "$magic" = '177ELF' ] || return 0
    order=$(od -An -t u1 -j 5 -N 1 "$1" | tr -d ' ')
    read -r lo hi < <(od -An -t u1 -j 18 -N 2 "$1")
    if [ "$order" = 2 ]; then echo $((lo * 256 + hi)); else echo $((hi * 256 + lo)); fi
}

# find_binary: builds the release binary for the target unless --binary named one, and checks
# that it is an executable for the target's machine. Sets binary.
find_binary() {
    if [ -z "$binary" ]; then
        cargo build --release --locked --target "$target" >&2
        binary="target/$target/release/redlock"
    fi
    [ -f "$binary" ] && [ -x "$binary" ] || { echo "redlock: $binary is not an executable" >&2; exit 66; }
    local machine
    machine=$(elf_machine_of "$binary")
    if [ "$machine" != "$elf_machine" ]; then
        echo "redlock: $binary is not a binary for $target (its ELF machine is ${machine:-none}, not $elf_machine); build it with --target $target" >&2
        exit 65
    fi
}

# strip_into SRC DEST: a stripped copy (debug symbols out: a fifth of the size). The host's
# strip for a binary of the host's machine, the target's binutils otherwise; without either
# the binary goes in as it is, which runs the same.
strip_into() {
    local tool=""
    if [ "$(elf_machine_of /proc/self/exe)" = "$elf_machine" ] && command -v strip >/dev/null; then
        tool=strip
    elif command -v "${target/-unknown-/-}-strip" >/dev/null; then
        tool="${target/-unknown-/-}-strip"
    fi
    install -D -m 0755 "$1" "$2"
    if [ -n "$tool" ] && ! "$tool" "$2" 2>/dev/null; then
        install -D -m 0755 "$1" "$2"
        tool=""
    fi
    [ -n "$tool" ] || echo "redlock: note: $1 goes in unstripped (no strip for $target here)" >&2
}

# stage_common ROOT: the files both packages hold, at the paths both families use. The shells'
# completion directories and the docs' compression differ; each script adds those.
stage_common() {
    local root=$1 page
    strip_into "$binary" "$root/usr/bin/redlock"
    for page in man/*.1; do
        install -D -m 0644 "$page" "$root/usr/share/man/man1/${page#man/}"
        gzip -9n "$root/usr/share/man/man1/${page#man/}"
    done
    install -D -m 0644 completions/redlock.bash "$root/usr/share/bash-completion/completions/redlock"
    install -D -m 0644 completions/redlock.fish "$root/usr/share/fish/vendor_completions.d/redlock.fish"
    # The README and docs/ link one another and the files below: each sits where it does in
    # the repository, uncompressed (a link to README.md reaches no README.md.gz), so every
    # link in an installed page reaches an installed file (tests/cli/package.rs checks it).
    local doc
    for doc in README.md CHANGELOG.md ARCHITECTURE.md benches/HISTORY.md docs/*.md schemas/*.json; do
        install -D -m 0644 "$doc" "$root/usr/share/doc/redlock/$doc"
    done
    local unit
    for unit in deploy/systemd/*; do
        install -D -m 0644 "$unit" "$root/usr/share/doc/redlock/examples/systemd/${unit##*/}"
    done
    # The alert rules (with their promtool tests) and the dashboard docs/monitoring.md installs.
    local watch
    for watch in deploy/prometheus/* deploy/grafana/*; do
        install -D -m 0644 "$watch" "$root/usr/share/doc/redlock/examples/${watch#deploy/}"
    done
}

version() {
    sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1
}

SUMMARY="guard shell commands and cron jobs with a Redis distributed lock"
DESCRIPTION="redlock run --key K --ttl 5m -- CMD takes a lease on a Redis key, runs CMD while
renewing it, stops CMD (and everything it started) before the lease could lapse, and releases
the lock on every exit path. Busy keys exit 75; status, release, acquire, extend and doctor help
operators during incidents. Works with one Redis, a quorum, Cluster and Sentinel."
