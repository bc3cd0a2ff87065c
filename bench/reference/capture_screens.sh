#!/usr/bin/env bash
# Captures small test screenshots of real X11 programs running under Xvfb.
# Needs Debian packages: xvfb xterm x11-apps xdotool imagemagick fonts-dejavu-core
#   apt-get install -y xvfb xterm x11-apps xdotool imagemagick fonts-dejavu-core
# and, for the editor/browser/desktop screens, also: chromium twm
#   apt-get install -y --no-install-recommends chromium twm
# (xedit, the Athena text editor, comes with x11-apps.)
# Writes into tests/fixtures/vision/screens/ (or $1):
#   xterm_1280x720.png      whole 1280x720 screen: two xterms with shell output + xeyes + xlogo
#   xterm_700x450.png       one 700x450 screen holding a single xterm (odd size, not a tile multiple)
#   xterm_700x450_rgba.png  the same picture as RGBA with an alpha gradient + transparent border
#   xterm_1280x720.jpg      the 1280x720 picture as a baseline JPEG (quality 85, 4:2:0)
#   xedit_1024x640.png      1024x640 screen: xedit with a C++ file, a half-typed function at the end
#   chromium_1280x800.png   1280x800 screen: a real Chromium window (not headless) showing a local docs page
#   desktop_1920x1080.png   1920x1080 "desktop" under the twm window manager: xedit (editing C++),
#                           an xterm with a shell session and Chromium with the docs page
# SCREENS selects sections (default: all): "xterm" (the first four files), "editor",
# "browser", "desktop". E.g. SCREENS="editor browser desktop" leaves the xterm_* files alone.
# Captures are real, so re-running gives near-identical but not byte-identical files.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-$ROOT/tests/fixtures/vision/screens}"
mkdir -p "$OUT"
SCREENS="${SCREENS:-xterm editor browser desktop}"
want() { [[ " $SCREENS " == *" $1 "* ]]; }
WORK="$(mktemp -d /tmp/tessera-screens.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  sleep 0.5; rm -rf "$WORK"
}
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

if want xterm; then  # (body not re-indented, to keep the original lines as they were)
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
fi  # want xterm

# --- shared bits for the editor / browser / desktop screens ------------------------
snap() {  # $1 display, $2 output file name: grab the whole root window as an RGB PNG
  import -display ":$1" -window root "$WORK/snap.png"
  convert "$WORK/snap.png" -strip -type TrueColor -define png:color-type=2 "$OUT/$2"
  if [ "$(stat -c %s "$OUT/$2")" -ge 400000 ]; then  # keep fixtures < 400 KB: 256-colour palette
    convert "$WORK/snap.png" -strip +dither -colors 256 -define png:color-type=3 "$OUT/$2"
  fi
}

mkdir -p "$WORK/project/src" "$WORK/site"
cat > "$WORK/project/src/tile.cpp" <<'SRC'
// src/tile.cpp - split a screenshot into square tiles for the vision encoder
#include <algorithm>
#include <cstdint>
#include <vector>

struct Image { int w, h; std::vector<uint8_t> rgb; };

static Image crop(const Image& src, int x0, int y0, int w, int h) {
    Image out{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
    for (int y = 0; y < h; ++y) {
        const uint8_t* row = &src.rgb[(size_t(y0 + y) * src.w + x0) * 3];
        std::copy(row, row + size_t(w) * 3, &out.rgb[size_t(y) * w * 3]);
    }
    return out;
}

std::vector<Image> split_tiles(const Image& img, int tile) {
    std::vector<Image> tiles;
    const int cols = (img.w + tile - 1) / tile;
    const int rows = (img.h + tile - 1) / tile;
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
            int x = c * tile, y = r * tile;
            tiles.push_back(crop(img, x, y, std::min(tile, img.w - x),
                                 std::min(tile, img.h - y)));
        }
    return tiles;
}
SRC
# what gets "typed" into the editor (left unfinished on purpose: the user is mid-edit)
XEDIT_TYPING=$'\nint count_tiles(const Image& img, int tile) {\n    return ((img.w + tile - 1) / tile) * ((img.h + ti'

cat > "$WORK/site/index.html" <<'HTML'
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tessera - Vision pipeline</title>
<style>
 body{margin:0;font-family:"DejaVu Sans",sans-serif;color:#1f2328;background:#fff}
 header{background:#24292f;color:#fff;padding:10px 24px;font-size:18px}
 header span{color:#8b949e;font-size:14px;margin-left:16px}
 nav{float:left;width:170px;padding:16px 24px;font-size:14px;line-height:2}
 nav a{color:#0969da;text-decoration:none;display:block}
 main{margin-left:220px;padding:8px 32px;max-width:720px;font-size:15px;line-height:1.5}
 h1{font-size:26px;border-bottom:1px solid #d0d7de;padding-bottom:6px}
 h2{font-size:19px;margin-top:22px}
 pre{background:#f6f8fa;border:1px solid #d0d7de;padding:10px;font:13px "DejaVu Sans Mono",monospace}
 table{border-collapse:collapse;font-size:14px}
 td,th{border:1px solid #d0d7de;padding:4px 12px;text-align:left}
 th{background:#f6f8fa}
 .note{background:#ddf4ff;border-left:4px solid #0969da;padding:8px 12px}
</style></head><body>
<header>tessera <span>Docs / Vision / Tiling</span></header>
<nav><a href="#">Getting started</a><a href="#">Model files</a><a href="#"><b>Vision pipeline</b></a>
<a href="#">Tokenizer</a><a href="#">Sampling</a><a href="#">Benchmarks</a><a href="#">FAQ</a></nav>
<main>
<h1>Vision pipeline: image tiling</h1>
<p>Large screenshots are resized and split into a grid of square tiles. A downscaled
global view is appended after the tiles, so the model sees the whole screen at once
as well as the fine detail of each part.</p>
<div class="note">Tip: wide screenshots produce more tiles than tall ones; crop to the
window you care about to save encoder time.</div>
<h2>Example</h2>
<pre>$ tessera run -m model.gguf --mmproj mmproj.gguf \
      --image screen.png -p "What is the user doing?"</pre>
<h2>Supported inputs</h2>
<table><tr><th>Format</th><th>Channels</th><th>Notes</th></tr>
<tr><td>PNG</td><td>gray, RGB, RGBA</td><td>alpha is blended onto white</td></tr>
<tr><td>JPEG</td><td>gray, RGB</td><td>baseline only</td></tr>
<tr><td>PPM</td><td>RGB</td><td>8-bit</td></tr></table>
<p>Each tile is encoded by the vision tower independently; the connector then
merges neighbouring patches into image tokens for the language model.</p>
</main></body></html>
HTML

# Chromium runs as a normal X11 window (not headless). --no-sandbox: its sandbox does not
# work as root / in containers; --test-type hides the "unsupported flag" infobar.
CHROMIUM_FLAGS=(--no-sandbox --test-type --no-first-run --no-default-browser-check
  --disable-gpu --disable-dev-shm-usage --password-store=basic
  --disable-features=Translate,MediaRouter --disable-component-update
  --disable-background-networking --disable-sync --hide-crash-restore-bubble)
start_chromium() {  # $1 profile name, $2 "x,y", $3 "w,h"; waits until the page is shown
  chromium "${CHROMIUM_FLAGS[@]}" --user-data-dir="$WORK/$1" \
    --window-position="$2" --window-size="$3" "file://$WORK/site/index.html" \
    >"$WORK/$1.log" 2>&1 & PIDS+=($!)
  timeout 90 xdotool search --sync --onlyvisible --name "tessera - Vision pipeline" >/dev/null \
    || { echo "chromium window did not appear (see log below)" >&2; tail -n 20 "$WORK/$1.log" >&2; exit 1; }
  sleep 3  # let it finish painting
}
start_xedit() {  # $1 geometry; opens src/tile.cpp (relative, so the path shown is short)
  bash -c 'cd "$1" && exec xedit -geometry "$2" src/tile.cpp' _ "$WORK/project" "$1" \
    >"$WORK/xedit.log" 2>&1 & PIDS+=($!)
  timeout 30 xdotool search --sync --onlyvisible --class Xedit >/dev/null
  sleep 1
}
type_in_xedit() {  # click on the empty area below the code (cursor goes to end of file), type
  local WINDOW X Y WIDTH HEIGHT SCREEN
  eval "$(xdotool search --onlyvisible --class Xedit | head -n 1 | xargs xdotool getwindowgeometry --shell)"
  xdotool mousemove $((X + WIDTH / 2)) $((Y + HEIGHT - 25)) click 1
  sleep 0.3
  xdotool type --delay 20 "$XEDIT_TYPING"
  sleep 0.5
}

# --- screen 3: text editor, 1024x640 -----------------------------------------------
if want editor; then
D3=94
start_x $D3 1024x640
export DISPLAY=:$D3
start_xedit 1024x640+0+0
type_in_xedit
snap $D3 xedit_1024x640.png
fi

# --- screen 4: web browser, 1280x800 -----------------------------------------------
if want browser; then
D4=95
start_x $D4 1280x800
export DISPLAY=:$D4
start_chromium chromium-4 0,0 1280,800
snap $D4 chromium_1280x800.png
fi

# --- screen 5: desktop, 1920x1080 --------------------------------------------------
# twm gives the windows title bars; the root window gets a plain background colour.
if want desktop; then
D5=96
start_x $D5 1920x1080
export DISPLAY=:$D5
convert -size 1920x1080 xc:"#2e3440" "$WORK/bg.png"
display -window root "$WORK/bg.png" || true  # sets the background, then exits 1
cat > "$WORK/twmrc" <<'TWM'
NoGrabServer
RandomPlacement
UsePPosition "on"
NoHighlight
BorderWidth 1
TitleFont "-misc-fixed-bold-r-normal--13-*-*-*-*-*-iso8859-1"
Color
{
    BorderColor "#4c566a"
    DefaultBackground "#3b4252"
    DefaultForeground "#eceff4"
    TitleBackground "#3b4252"
    TitleForeground "#eceff4"
    MenuBackground "#3b4252"
    MenuForeground "#eceff4"
}
TWM
twm -f "$WORK/twmrc" >/dev/null 2>&1 & PIDS+=($!)
sleep 1
start_chromium chromium-5 930,26 980,1044
start_xedit 900x610+8+26
xterm "${FONT[@]}" -geometry 110x22+8+668 -bg black -fg "#d8dee9" -title "user@tessera: ~/project" \
  -hold -e bash -c 'session_a' & PIDS+=($!)
sleep 2
type_in_xedit
snap $D5 desktop_1920x1080.png
fi

ls -l "$OUT"
