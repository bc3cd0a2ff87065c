#!/usr/bin/env bash
# Captures small test screenshots of real X11 programs running under Xvfb.
# Needs Debian packages: xvfb xterm x11-apps xdotool imagemagick fonts-dejavu-core
#   apt-get install -y xvfb xterm x11-apps xdotool imagemagick fonts-dejavu-core
# Writes into tests/fixtures/vision/screens/ (or $1):
#   xterm_1280x720.png      whole 1280x720 screen: two xterms with shell output + xeyes + xlogo
#   xterm_700x450.png       one 700x450 screen holding a single xterm (odd size, not a tile multiple)
#   xterm_700x450_rgba.png  the same picture as RGBA with an alpha gradient + transparent border
#   xterm_1280x720.jpg      the 1280x720 picture as a baseline JPEG (quality 85, 4:2:0)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-$ROOT/tests/fixtures/vision/screens}"
mkdir -p "$OUT"
PIDS=()
cleanup() { for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

FONT=(-fa "DejaVu Sans Mono" -fs 10)

session_a() {  # deterministic "shell session" text
  cat <<'TXT'
user@tessera:~/project$ ls -l src
total 48
-rw-r--r-- 1 user user  5120 Mar  3 10:21 gguf.cpp
-rw-r--r-- 1 user user  9314 Mar  3 10:21 model.cpp
-rw-r--r-- 1 user user  2201 Mar  3 10:21 sampler.cpp
-rw-r--r-- 1 user user  7730 Mar  3 10:21 tokenizer.cpp
-rw-r--r-- 1 user user 12044 Mar  3 10:21 vision.cpp
user@tessera:~/project$ make -j2 test
[ 25%] Building CXX object src/CMakeFiles/tessera.dir/vision.cpp.o
[ 50%] Linking CXX static library libtessera.a
[ 75%] Building CXX object tests/CMakeFiles/test_model.dir/test_model.cpp.o
[100%] Built target test_model
Running tests...
      Start 1: test_gguf ........................   Passed    0.02 sec
      Start 2: test_tokenizer ...................   Passed    0.31 sec
      Start 3: test_model .......................***Failed    1.87 sec
67% tests passed, 1 tests failed out of 3
user@tessera:~/project$ git status --short
 M src/vision.cpp
?? notes.txt
user@tessera:~/project$ _
TXT
}
session_b() {
  cat <<'TXT'
$ python3 -c "print(sum(range(100)))"
4950
$ echo "The quick brown fox jumps over the lazy dog"
The quick brown fox jumps over the lazy dog
$ df -h /
Filesystem      Size  Used Avail Use% Mounted on
/dev/vda        252G   18G   79G  18% /
$ uptime
 10:24:01 up 3 days,  2:11,  1 user,  load average: 0.42, 0.37, 0.30
$ _
TXT
}
export -f session_a session_b

start_x() {  # $1 display, $2 WxH
  Xvfb ":$1" -screen 0 "${2}x24" -nolisten tcp >/dev/null 2>&1 &
  PIDS+=($!)
  for _ in $(seq 50); do xdpyinfo -display ":$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "Xvfb :$1 did not start" >&2; exit 1
}

# --- screen 1: 1280x720 ------------------------------------------------------------
D1=97
start_x $D1 1280x720
export DISPLAY=:$D1
xsetroot -solid "#2e3440" 2>/dev/null || true
xterm "${FONT[@]}" -geometry 86x30+10+10 -bg black -fg "#d8dee9" -title "shell" \
  -hold -e bash -c 'session_a' & PIDS+=($!)
xterm "${FONT[@]}" -geometry 64x14+650+340 -bg "#fdf6e3" -fg "#073642" -title "notes" \
  -hold -e bash -c 'session_b' & PIDS+=($!)
xeyes -geometry 160x120+1080+20 & PIDS+=($!)
xlogo -geometry 120x120+900+40 & PIDS+=($!)
sleep 2
import -display :$D1 -window root "$OUT/xterm_1280x720.png.tmp.png"
convert "$OUT/xterm_1280x720.png.tmp.png" -strip -type TrueColor -define png:color-type=2 "$OUT/xterm_1280x720.png"
rm -f "$OUT/xterm_1280x720.png.tmp.png"

# --- screen 2: 700x450 -------------------------------------------------------------
D2=98
start_x $D2 700x450
export DISPLAY=:$D2
xsetroot -solid "#444444" 2>/dev/null || true
xterm "${FONT[@]}" -geometry 96x26+0+0 -bg "#1d1f21" -fg "#c5c8c6" -title "small" \
  -hold -e bash -c 'session_b; session_a | head -n 8' & PIDS+=($!)
sleep 2
import -display :$D2 -window root "$OUT/xterm_700x450.tmp.png"
convert "$OUT/xterm_700x450.tmp.png" -strip -type TrueColor -define png:color-type=2 "$OUT/xterm_700x450.png"
rm -f "$OUT/xterm_700x450.tmp.png"

# --- decoder variants --------------------------------------------------------------
# RGBA: alpha ramps 255 -> 64 left to right, and a fully transparent 10px border.
convert "$OUT/xterm_700x450.png" \
  \( -size 450x700 gradient:white-"#404040" -rotate 90 \
     -fill black -draw "rectangle 0,0 699,9" -draw "rectangle 0,440 699,449" \
     -draw "rectangle 0,0 9,449" -draw "rectangle 690,0 699,449" \) \
  -alpha off -compose CopyOpacity -composite -strip \
  -define png:color-type=6 "$OUT/xterm_700x450_rgba.png"
convert "$OUT/xterm_1280x720.png" -strip -quality 85 -sampling-factor 4:2:0 \
  -interlace none "$OUT/xterm_1280x720.jpg"

ls -l "$OUT"
