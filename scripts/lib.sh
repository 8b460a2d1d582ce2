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
