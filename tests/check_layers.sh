#!/usr/bin/env bash
# The layers' one-way rule, checked the way the build enforces it: a source file of each layer
# is compiled (syntax only) with an include of a header from a layer above it, which must not
# be found; and with one from a layer below, which must. Usage: check_layers.sh BUILD_DIR
set -u
build="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
db="$build/compile_commands.json"
[ -f "$db" ] || { echo "no $db"; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
compiles() {  # source file of the layer, header: does '#include "header"' compile there?
  local src="$root/$1" header="$2" cmd
  cmd=$(python3 - "$db" "$src" <<'PY'
import json, shlex, sys
for e in json.load(open(sys.argv[1])):
    if e["file"] == sys.argv[2]:
        args = shlex.split(e["command"])
        out = []
        skip = False
        for a in args:
            if skip: skip = False; continue
            if a in ("-o", "-c"): skip = True; continue
            if a == sys.argv[2]: continue
            out.append(a)
        print(shlex.join(out)); break
PY
)
  [ -n "$cmd" ] || { echo "no compile command for $1"; return 2; }
  printf '#include "%s"\nint main() { return 0; }\n' "$header" >"$tmp/probe.cpp"
  (cd "$build" && eval "$cmd -fsyntax-only $tmp/probe.cpp") >/dev/null 2>&1
}
refused() {  # layer source, upward header
  if compiles "$1" "$2"; then fail=$((fail + 1)); echo "FAIL $1 may include $2 (upward)"; else pass=$((pass + 1)); echo "ok   $1 cannot include $2"; fi
}
allowed() {  # layer source, downward header
  if compiles "$1" "$2"; then pass=$((pass + 1)); echo "ok   $1 includes $2"; else fail=$((fail + 1)); echo "FAIL $1 cannot include $2 (downward)"; fi
}
refused src/core/error.cpp profile/profiler.h
refused src/core/error.cpp kernels/kernels.h
refused src/kernels/dispatch.cpp formats/gguf.h
refused src/kernels/dispatch.cpp profile/profiler.h
refused src/formats/gguf.cpp kernels/kernels.h
refused src/formats/gguf.cpp text/tokenizer.h
refused src/text/tokenizer.cpp image/image.h
refused src/image/resize.cpp formats/gguf.h
refused src/profile/peaks.cpp models/llama/llama.h
refused src/models/smolvlm/idefics3.cpp runtime/session.h
refused src/runtime/session.cpp watch/watcher.h
refused src/watch/watcher.cpp tessera/tessera.h
refused src/watch/watcher.cpp serve/server.h
refused src/api/c_api.cpp serve/engine.h
refused src/plan/predict.cpp runtime/session.h
refused src/models/footprint.cpp plan/predict.h
allowed src/kernels/dispatch.cpp core/thread_pool.h
allowed src/text/tokenizer.cpp formats/gguf.h
allowed src/models/smolvlm/idefics3.cpp kernels/kernels.h
allowed src/models/smolvlm/idefics3.cpp models/llama/llama.h
allowed src/watch/watcher.cpp runtime/session.h
allowed src/api/c_api.cpp watch/watcher.h
allowed src/serve/engine.cpp watch/watcher.h
allowed src/plan/predict.cpp models/footprint.h
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
