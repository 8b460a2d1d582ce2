# Helpers shared by the scripts in this folder (sourced, not run).

step() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

has_rustup_wasm_target() {
    command -v rustup >/dev/null 2>&1 &&
        rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown
}

# The exact wasm-bindgen version the core crate pins (`wasm-bindgen = "=X.Y.Z"`): the CLI must match it.
pinned_wasm_bindgen_version() {
    sed -n 's/^wasm-bindgen = "=\([0-9.]*\)"/\1/p' Cargo.toml
}

WASM_TARGET=wasm32-unknown-unknown

# Where wasm_cargo's artifacts go: Debian's route has its own target dir, so that a different rustc neither
# invalidates nor reuses the rustup build's artifacts.
wasm_target_dir() {
    if has_rustup_wasm_target; then echo target; else echo target/debian-wasm; fi
}

# `cargo SUBCOMMAND --target wasm32-unknown-unknown ARGS...` (build, clippy): rustup's wasm32 target where one is
# installed, else Debian's rustc-web with -Zbuild-std (rustup cannot download targets on every machine).
# There std is built small too: panics abort without a message, no
# file/line strings, shallow derived Debug, optimize_for_size, and no reference types (Debian's wasm-opt cannot
# read the table.fill wasm-bindgen emits for them). Clippy gets the same flags, so it checks the code that ships.
wasm_cargo() {
    local subcommand=$1
    shift
    if has_rustup_wasm_target; then
        step "wasm: cargo $subcommand with rustup's $WASM_TARGET target"
        cargo "$subcommand" --target "$WASM_TARGET" "$@"
        return
    fi
    step "wasm: cargo $subcommand with Debian's rustc-web and -Zbuild-std"
    local tool
    for tool in /usr/bin/cargo /usr/bin/rustc /usr/bin/rust-lld; do
        [[ -x $tool ]] || { echo "missing $tool: run scripts/setup (installs rustc-web cargo-web rust-web-src rust-web-llvm lld-22)" >&2; return 1; }
    done
    if [[ $subcommand == clippy && ! -x /usr/bin/cargo-clippy ]]; then
        echo "missing /usr/bin/cargo-clippy: run scripts/setup (installs rust-web-clippy)" >&2
        return 1
    fi
    env RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1 PATH="/usr/bin:$PATH" \
        RUSTFLAGS="${RUSTFLAGS:-} -Ctarget-feature=-reference-types -Zlocation-detail=none -Zfmt-debug=shallow -Zunstable-options -Cpanic=immediate-abort" \
        /usr/bin/cargo "$subcommand" --target "$WASM_TARGET" --target-dir "$(wasm_target_dir)" \
        -Zbuild-std=std,panic_abort -Zbuild-std-features=optimize_for_size "$@"
}

# luacheck on the scripts Redis runs, as the build makes them from lua/ (written to target/lua).
lint_lua() {
    step "luacheck: the scripts Redis runs (edgelimit scripts --out target/lua)"
    rm -rf target/lua
    cargo run -q -p edgelimit-cli -- scripts --out target/lua
    luacheck --quiet target/lua
}
