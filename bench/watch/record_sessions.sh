#!/usr/bin/env bash
# Records short REAL screen sessions (X11 programs under Xvfb, driven by xdotool) as PNG
# sequences at exactly 1920x1080, for the screen-watching workload (frame-to-frame reuse).
#
# Usage: bench/watch/record_sessions.sh [OUTDIR]        (default: tests/fixtures/watch)
#        SESSIONS="typing idle" bench/watch/record_sessions.sh /tmp/watch   (subset)
#
# Writes OUTDIR/<session>/frame_000.png, frame_001.png, ... (8-bit RGB, no metadata):
#   typing  8 frames  twm desktop, xedit with a notes file; a sentence typed in 8 bursts
#   scroll  6 frames  twm desktop, xterm running `less` on GPL-3 (numbered); Down/space/d keys
#   switch  6 frames  twm desktop, xterm (dark, file listing) and xedit (C++), raised in turn
#   browse  6 frames  chromium (no WM) at 0,0 1920x1080 on a local article; Page_Down + wheel
#   idle    4 frames  twm desktop, xedit + xterm at a prompt, 1 s apart, nothing done
#   typing_long  TYPING_FRAMES frames (default 600; not in the default set): the typing desktop,
#           a paragraph typed into xedit a burst (about 4 characters) per frame, Return at line
#           ends, the file scrolling as it grows; for bench/serve/watch_bench.py --replay (10 min
#           at 1 fps). Frames at PNG compression level 1 (about 0.5 s a grab).
# Needs (Debian): xvfb xdotool xterm x11-apps (xedit) twm chromium imagemagick x11-utils
#                 fonts-dejavu-core
# Each session gets its own Xvfb on a free display number (Xvfb -displayfd). Everything the
# script starts is killed on exit. Frames are written by ImageMagick `import` with -strip,
# so identical screens give byte-identical PNGs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="${1:-$ROOT/tests/fixtures/watch}"
SESSIONS="${SESSIONS:-typing scroll switch browse idle}"
W=1920 H=1080
BG="#3a4a5a"

need() {
  local missing=() p
  for p in "$@"; do command -v "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "record_sessions.sh: missing program(s): ${missing[*]}" >&2
    echo "  Debian: apt-get install -y xvfb xdotool xterm x11-apps twm x11-utils imagemagick fonts-dejavu-core" >&2
    echo "          apt-get install -y --no-install-recommends chromium   (for the browse session)" >&2
    exit 1
  fi
}
need Xvfb xdotool xdpyinfo import display identify xterm xedit twm less
[[ " $SESSIONS " == *" browse "* ]] && need chromium

mkdir -p "$OUT"
WORK="$(mktemp -d /tmp/tessera-watch.XXXXXX)"
PIDS=()      # processes of the current session (killed at session end)
PGROUPS=()   # process groups (chromium and its helpers), killed as groups
XPID=""
cleanup() {
  local p
  for p in "${PGROUPS[@]:-}"; do if [ -n "$p" ]; then kill -- "-$p" 2>/dev/null || true; fi; done
  for p in "${PIDS[@]:-}"; do if [ -n "$p" ]; then kill "$p" 2>/dev/null || true; fi; done
  if [ -n "$XPID" ]; then kill "$XPID" 2>/dev/null || true; fi
  PIDS=(); PGROUPS=(); XPID=""
}
trap 'cleanup; sleep 0.3; rm -rf "$WORK"; [ -z "${SITE:-}" ] || rm -rf "$SITE"' EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- X server / desktop
start_x() {  # starts Xvfb on a free display; exports DISPLAY
  rm -f "$WORK/dpy"
  Xvfb -displayfd 3 -screen 0 "${W}x${H}x24" -nolisten tcp \
    3>"$WORK/dpy" >"$WORK/xvfb.log" 2>&1 &
  XPID=$!
  local n
  for _ in $(seq 100); do
    n="$(tr -dc 0-9 2>/dev/null <"$WORK/dpy" || true)"
    if [ -n "$n" ] && xdpyinfo -display ":$n" >/dev/null 2>&1; then export DISPLAY=":$n"; return 0; fi
    kill -0 "$XPID" 2>/dev/null || break
    sleep 0.1
  done
  echo "Xvfb did not start:" >&2; cat "$WORK/xvfb.log" >&2; exit 1
}
set_background() {  # plain desktop colour on the root window (display exits 1 when done)
  display -size "${W}x${H}" -window root "xc:$BG" >/dev/null 2>&1 || true
}
start_twm() {  # a simple window manager: title bars, windows placed where they ask
  cat > "$WORK/twmrc" <<'TWM'
NoGrabServer
UsePPosition "on"
RandomPlacement
NoHighlight
BorderWidth 1
TitleFont "-misc-fixed-bold-r-normal--13-*-*-*-*-*-iso8859-1"
Color
{
    BorderColor "#4c566a"
    DefaultBackground "#2b3440"
    DefaultForeground "#e5e9f0"
    TitleBackground "#2b3440"
    TitleForeground "#e5e9f0"
    MenuBackground "#2b3440"
    MenuForeground "#e5e9f0"
}
TWM
  twm -f "$WORK/twmrc" >/dev/null 2>&1 & PIDS+=($!)
  sleep 0.5
}
desktop() { start_x; set_background; start_twm; }
end_session() { cleanup; sleep 0.5; }

wait_window() {  # $1 search args (e.g. "--class Xedit"), prints the first window id
  local id
  # shellcheck disable=SC2086
  id="$(timeout 60 xdotool search --sync --onlyvisible $1 2>/dev/null | head -n 1)" || true
  [ -n "$id" ] || { echo "window ($1) did not appear" >&2; exit 1; }
  echo "$id"
}

# ---------------------------------------------------------------- capture
FRAME=0 SDIR=""
begin_frames() { SDIR="$OUT/$1"; rm -rf "$SDIR"; mkdir -p "$SDIR"; FRAME=0; }
snap() {  # whole root window -> 8-bit RGB PNG without metadata
  local f; f="$SDIR/$(printf 'frame_%03d.png' "$FRAME")"
  sleep "${1:-0.4}"   # let the programs repaint
  import -display "$DISPLAY" -window root -depth 8 -strip \
    -define png:compression-level=9 -define png:color-type=2 -define png:exclude-chunks=date,time \
    "png24:$f"
  FRAME=$((FRAME + 1))
}

# ---------------------------------------------------------------- content
FONT=(-fa "DejaVu Sans Mono" -fs 10)
# The article lives at a fixed path: chromium shows its URL, which must not vary between runs.
SITE=/tmp/tessera-journal
mkdir -p "$WORK/project/src"
cat > "$WORK/project/notes.txt" <<'TXT'
Screen watcher - notes                                        (week 14)

Goals
  * keep the assistant responsive while the user works: < 300 ms per frame
  * only re-encode the parts of the screen that changed since the last frame
  * never send the same tile twice when the screen is idle

Findings so far
  1. Typing changes one or two text lines plus the caret; everything else
     stays put, so tile reuse should skip almost the whole frame.
  2. Scrolling moves content vertically by whole text lines.  Exact tile
     reuse misses most of it; a shift detector could catch it.
  3. Switching windows changes large areas at once.  Not much to gain.
  4. Browsers repaint anti-aliased text; compare pixels exactly, not hashes
     of the compressed image.

Open questions
  - How big should the tiles be?  448 px (encoder native) vs 224 px.
  - Does the global thumbnail need re-encoding if only one tile changed?
  - What about the clock in the panel?  (changes every minute)

TXT
cat > "$WORK/project/src/tile_cache.cpp" <<'SRC'
// src/tile_cache.cpp - remember encoded tiles between frames
#include <cstdint>
#include <cstring>
#include <unordered_map>
#include <vector>

struct TileKey {
    uint64_t hash;
    int x, y;
    bool operator==(const TileKey& o) const {
        return hash == o.hash && x == o.x && y == o.y;
    }
};

struct TileKeyHash {
    size_t operator()(const TileKey& k) const {
        return size_t(k.hash ^ (uint64_t(k.x) << 32) ^ uint64_t(k.y));
    }
};

class TileCache {
public:
    explicit TileCache(size_t max_tiles) : max_tiles_(max_tiles) {}

    const std::vector<float>* find(const TileKey& key) const {
        auto it = map_.find(key);
        return it == map_.end() ? nullptr : &it->second;
    }

    void put(const TileKey& key, std::vector<float> embedding) {
        if (map_.size() >= max_tiles_) map_.clear();
        map_[key] = std::move(embedding);
    }

private:
    size_t max_tiles_;
    std::unordered_map<TileKey, std::vector<float>, TileKeyHash> map_;
};
SRC
listing() {  # deterministic "shell session" for the dark xterm
  cat <<'TXT'
user@tessera:~/project$ ls -l src tests
src:
total 92
-rw-r--r-- 1 user user  5120 Apr  2 09:12 gguf.cpp
-rw-r--r-- 1 user user  9314 Apr  2 09:12 model.cpp
-rw-r--r-- 1 user user  2201 Apr  2 09:12 sampler.cpp
-rw-r--r-- 1 user user  1387 Apr  2 11:40 tile_cache.cpp
-rw-r--r-- 1 user user  7730 Apr  2 09:12 tokenizer.cpp
-rw-r--r-- 1 user user 12044 Apr  2 10:58 vision.cpp
-rw-r--r-- 1 user user  4410 Apr  2 10:58 watch.cpp

tests:
total 36
-rw-r--r-- 1 user user 3312 Apr  2 09:12 test_gguf.cpp
-rw-r--r-- 1 user user 6120 Apr  2 10:58 test_vision.cpp
-rw-r--r-- 1 user user 2904 Apr  2 11:40 test_watch.cpp
user@tessera:~/project$ git log --oneline -6
4c1e9a2 watch: reuse unchanged tiles between frames
91b07d3 vision: split screenshots into 448px tiles
e2aa610 sampler: top-p with temperature 0 is greedy
7f3c2d1 tokenizer: byte fallback for unknown pieces
0d9e8b4 gguf: read tensor infos lazily
a51c6f0 initial import
user@tessera:~/project$ make -j2 test_watch && ./test_watch
[ 50%] Building CXX object tests/CMakeFiles/test_watch.dir/test_watch.cpp.o
[100%] Linking CXX executable test_watch
test_watch: 14 cases, 14 passed
user@tessera:~/project$
TXT
}
export -f listing

# start_xedit FILE GEOMETRY (relative path, so xedit shows a short name)
start_xedit() {
  bash -c 'cd "$1" && exec xedit -geometry "$2" "$3"' _ "$WORK/project" "$2" "$1" \
    >"$WORK/xedit.log" 2>&1 & PIDS+=($!)
}
start_shell_xterm() {  # $1 geometry, $2 title, [$3 more xterm options]; listing, then a prompt
  # shellcheck disable=SC2086,SC2016  # ($3: word list; the inner bash expands $(listing))
  xterm "${FONT[@]}" ${3:-} -geometry "$1" -bg "#1d2229" -fg "#d8dee9" -cr "#d8dee9" -title "$2" \
    -e bash -c 'printf "%s " "$(listing)"; exec sleep 100000' & PIDS+=($!)
}

# ---------------------------------------------------------------- sessions
typing_desktop() {  # xedit on the notes over a shell xterm, the caret at the end of the file
  desktop
  start_shell_xterm 96x24+1040+620 "user@tessera: ~/project"
  wait_window "--class XTerm" >/dev/null   # map the xterm first, so xedit ends up on top
  sleep 0.5
  start_xedit notes.txt 1220x860+40+40
  local xe; xe="$(wait_window "--class Xedit")"
  sleep 1.5
  # put the caret at the end of the file: click in the empty area below the text
  # shellcheck disable=SC2034  # (set by getwindowgeometry --shell)
  local WINDOW X Y WIDTH HEIGHT SCREEN
  eval "$(xdotool getwindowgeometry --shell "$xe")"
  # (the pointer stays there: twm gives the keyboard focus to the window under the pointer)
  xdotool mousemove $((X + WIDTH / 3)) $((Y + HEIGHT - 40)) click 1
  sleep 0.3
}

session_typing() {
  typing_desktop
  begin_frames typing
  local bursts=("Next: measure " "reuse on real " "sessions (typing," " scrolling, " "switching, browsing" " and idle) before " "changing the tile " "size to 224 px.")
  local b
  for b in "${bursts[@]}"; do
    xdotool type --delay 60 "$b"
    snap 0.5
  done
  end_session
}

session_typing_long() {
  typing_desktop
  begin_frames typing_long
  local text="Measured today: exact tile reuse keeps most of the screen while typing, but the prompt tail is recomputed every frame when the edit sits in the first row of tiles. The server should encode when the screen settles, hold its CPU budget, and answer a question ahead of background work. Next: replay this session at one frame per second and report staleness, time to first token and resident memory over ten minutes. "
  local n="${TYPING_FRAMES:-600}" i=0 pos=0 col=0 burst
  while [ "$i" -lt "$n" ]; do
    burst="${text:$pos:4}"
    pos=$(( (pos + 4) % ${#text} ))
    xdotool type --delay 40 "$burst"
    col=$((col + 4))
    if [ "$col" -ge 88 ]; then xdotool key Return; col=0; fi
    FRAME=$i
    local f; f="$SDIR/$(printf 'frame_%03d.png' "$i")"
    sleep 0.1
    import -display "$DISPLAY" -window root -depth 8 -strip -define png:compression-level=1 \
      -define png:color-type=2 -define png:exclude-chunks=date,time "png24:$f"
    i=$((i + 1))
  done
  end_session
}

session_scroll() {
  desktop
  cat -n /usr/share/common-licenses/GPL-3 > "$WORK/GPL-3.txt"
  xterm "${FONT[@]}" -geometry 132x56+80+30 -bg "#fbf7ec" -fg "#2a2a2a" -cr "#2a2a2a" \
    -title "less GPL-3.txt" -e less -S "$WORK/GPL-3.txt" & PIDS+=($!)
  local xt; xt="$(wait_window "--class XTerm")"
  sleep 1.5
  # twm focuses the window under the pointer (the pointer is not in the captures)
  # shellcheck disable=SC2034  # (set by getwindowgeometry --shell)
  local WINDOW X Y WIDTH HEIGHT SCREEN
  eval "$(xdotool getwindowgeometry --shell "$xt")"
  xdotool mousemove $((X + WIDTH - 40)) $((Y + HEIGHT - 40))
  begin_frames scroll
  local keys=("Down Down Down" "space" "Down" "space" "d" "space")
  local k
  for k in "${keys[@]}"; do
    # shellcheck disable=SC2086
    xdotool key --delay 80 $k   # (not --window: xterm ignores synthetic events)
    snap 0.6
  done
  end_session
}

session_switch() {
  desktop
  start_shell_xterm 110x44+60+40 "user@tessera: ~/project"
  local xt; xt="$(wait_window "--class XTerm")"
  start_xedit src/tile_cache.cpp 1100x800+500+180
  local xe; xe="$(wait_window "--class Xedit")"
  sleep 1.5
  xdotool mousemove 1880 1050
  begin_frames switch
  local i
  for i in 1 2 3 4 5 6; do
    if [ $((i % 2)) -eq 1 ]; then xdotool windowraise "$xt"; else xdotool windowraise "$xe"; fi
    snap 0.6
  done
  end_session
}

write_article() {
  mkdir -p "$SITE"
  cat > "$SITE/watching-the-screen.html" <<'HTML'
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Watching the screen without watching every pixel</title>
<style>
 body{margin:0;background:#f4f1ea;color:#222;font:18px/1.65 "DejaVu Serif",serif}
 header{background:#1f2a36;color:#f4f1ea;padding:14px 48px;font:16px "DejaVu Sans",sans-serif}
 header b{font-size:20px;margin-right:24px}
 header a{color:#9fb7cf;margin-right:18px;text-decoration:none}
 article{max-width:820px;margin:0 auto;padding:24px 48px 80px;background:#fff;
   border-left:1px solid #ddd;border-right:1px solid #ddd}
 h1{font:bold 38px/1.2 "DejaVu Sans",sans-serif;margin:24px 0 8px}
 .byline{color:#777;font:15px "DejaVu Sans",sans-serif;margin-bottom:28px}
 h2{font:bold 26px "DejaVu Sans",sans-serif;margin:40px 0 10px;color:#1f2a36}
 h3{font:bold 20px "DejaVu Sans",sans-serif;margin:28px 0 6px;color:#37506a}
 pre{background:#272c34;color:#e6e6e6;padding:14px 18px;font:14px/1.5 "DejaVu Sans Mono",monospace;overflow:auto}
 blockquote{border-left:5px solid #c8a96a;margin:24px 0;padding:4px 20px;color:#555;font-style:italic}
 table{border-collapse:collapse;font:15px "DejaVu Sans",sans-serif;margin:16px 0}
 td,th{border:1px solid #ccc;padding:6px 14px;text-align:right}
 th{background:#eef2f6} td:first-child,th:first-child{text-align:left}
 .fig{height:220px;margin:20px 0;background:linear-gradient(90deg,#6b8cae 0 18%,#a3be8c 18% 46%,#ebcb8b 46% 71%,#d08770 71% 88%,#bf616a 88%);
   color:#fff;font:bold 18px "DejaVu Sans",sans-serif;display:flex;align-items:flex-end;padding:10px;box-sizing:border-box}
 .cap{color:#666;font:14px "DejaVu Sans",sans-serif;margin-top:-12px}
 footer{text-align:center;color:#888;font:14px "DejaVu Sans",sans-serif;padding:30px}
</style></head><body>
<header><b>tessera journal</b><a href="#">Engine</a><a href="#">Vision</a><a href="#">Benchmarks</a><a href="#">About</a></header>
<article>
<h1>Watching the screen without watching every pixel</h1>
<div class="byline">Engineering notes &middot; 12 minute read &middot; filed under vision, performance</div>
<p>A screen-watching assistant looks at the same desktop over and over again. Most of the time the
user is typing into one window, reading a page, or not doing anything at all. If every frame is
encoded from scratch, the vision encoder spends nearly all of its time re-reading pixels that it has
already seen a second ago. This article describes what changes between frames in real sessions and
how much work an engine can skip by reusing what it computed before.</p>
<p>We recorded short sessions on an ordinary desktop: an editor, a terminal with a pager, two windows
raised in turn, a web browser scrolled with the keyboard and the mouse wheel, and a desktop left
alone. Each session is a sequence of full-resolution screenshots, 1920 by 1080 pixels, taken after
each user action.</p>

<h2>1. What actually changes</h2>
<p>When someone types, the change is tiny: a few glyphs and the caret, usually inside a single line of
text. Even with generous tiles, one or two tiles out of several dozen are touched. Everything else, the
window decorations, the other windows, the desktop background, is bit-for-bit identical to the
previous frame.</p>
<p>Scrolling is different. The content of a window moves up by a whole number of text lines, so almost
every tile inside the window changes, even though the picture is the same picture shifted by a few
rows. Exact reuse finds nothing inside the window; it only keeps the parts outside of it.</p>
<blockquote>The cheapest pixel to encode is the one you encoded last time. The second cheapest is the
one you encoded last time, twenty pixels higher up.</blockquote>
<p>Switching between windows is the worst case. Large rectangles of the screen are replaced by
different content, and there is no earlier frame that holds the new picture at the same position
unless the user keeps going back and forth between the same two windows.</p>

<h2>2. Measuring reuse</h2>
<p>For every pair of consecutive frames we split both images into a grid of square tiles and counted
the tiles whose pixels are exactly equal. The table below gives the share of tiles that could be
skipped for each session type, for two tile sizes.</p>
<table>
<tr><th>Session</th><th>Frames</th><th>Reuse, 448 px</th><th>Reuse, 224 px</th></tr>
<tr><td>typing</td><td>8</td><td>94 %</td><td>98 %</td></tr>
<tr><td>scroll</td><td>6</td><td>41 %</td><td>47 %</td></tr>
<tr><td>switch</td><td>6</td><td>22 %</td><td>30 %</td></tr>
<tr><td>browse</td><td>6</td><td>9 %</td><td>12 %</td></tr>
<tr><td>idle</td><td>4</td><td>100 %</td><td>100 %</td></tr>
</table>
<p>Smaller tiles help, but only a little, and they have a price: the encoder sees less context per
tile, and the number of tiles to hash and compare grows with the square of the resolution.</p>
<div class="fig">where the encoder time goes</div>
<p class="cap">Figure 1. Share of encoder time per stage for a browse session, from left to right:
decode, tile, hash, encode, merge.</p>

<h2>3. A simple tile cache</h2>
<p>The cache keeps the embeddings of the tiles of the last frame, keyed by tile position and a hash of
the tile's pixels. A tile whose hash matches is not encoded again; its embedding is copied. The hash
is only a filter: two tiles with the same hash are compared byte for byte before they are reused, so a
collision can never produce a wrong answer.</p>
<pre>for (int t = 0; t &lt; n_tiles; ++t) {
    const uint64_t h = hash_tile(frame, t);
    if (prev.hash[t] == h &amp;&amp; same_pixels(prev, frame, t)) {
        reuse(t);               // copy last frame's embedding
    } else {
        encode(t);              // run the vision tower on this tile
        prev.hash[t] = h;
    }
}</pre>
<p>This is enough for typing and idle sessions. The encoder runs for one or two tiles per frame, and
the language model receives the same image tokens as before for the rest of the screen.</p>

<h3>3.1 The global thumbnail</h3>
<p>Most tiling schemes also encode a downscaled view of the whole screen. Any change anywhere on the
screen changes the thumbnail, so it has to be encoded again for every frame that is not perfectly
identical to the previous one. For small changes this single image can cost more than the tiles that
actually changed.</p>
<p>One option is to refresh the thumbnail only every few frames, or only when the number of changed
tiles exceeds a threshold. The assistant then sees a slightly stale overview but an exact view of the
changed region, which is usually what matters.</p>

<h3>3.2 Blinking carets and clocks</h3>
<p>A desktop is rarely perfectly still. Carets blink, clocks tick, download indicators spin. Each of
these touches one tile, so an idle screen still costs one tile encode per frame now and then. A small
mask of known noisy regions removes most of it, but the mask has to follow the windows when they
move.</p>

<h2>4. Shifted content</h2>
<p>Scrolled text is a shifted copy of the previous frame. A cheap detector compares rows of pixels:
it hashes every row of the window and looks for the offset at which the most row hashes line up.
If the best offset explains most of the window, the tiles of the new frame can be matched against
shifted tiles of the old one.</p>
<p>Unfortunately the vision encoder does not see shifted tiles as shifted embeddings. The patch grid
moves relative to the content, so a tile that holds the same text twenty pixels higher up produces a
different embedding. Shift detection therefore helps the cache only when the shift is a multiple of
the patch size, or when tiles are aligned to the content rather than to the screen.</p>
<blockquote>Alignment matters more than the hash function. Every clever trick in this section falls
apart if the grid is not where the content is.</blockquote>

<h2>5. Browsers</h2>
<p>A browser page that is scrolled with the mouse wheel moves by a fixed number of pixels per notch,
and by almost a whole window height per Page Down key. Sticky headers stay in place while the rest
of the page moves underneath them, and fixed elements such as a cookie banner or a chat button are
painted over the scrolled content.</p>
<p>Text in a browser is anti-aliased, and sub-pixel positioning can make the same word look different
depending on where it lands. Comparing tiles by exact pixels is still safe; it only means that fewer
tiles match than a human would expect.</p>
<div class="fig" style="background:linear-gradient(180deg,#2e3440 0 30%,#4c566a 30% 55%,#d8dee9 55%)">frame-to-frame difference, browse session</div>
<p class="cap">Figure 2. Rows that differ between two consecutive frames of the browse session.</p>

<h2>6. Budget per frame</h2>
<p>At one frame per second the whole pipeline, from screenshot to the first generated token, has to
finish in well under a second to keep up. With reuse, a typing session needs one or two tile encodes
per frame and fits easily. A browse session needs almost a full encode per frame and does not, unless
frames are dropped while the user is scrolling.</p>
<table>
<tr><th>Stage</th><th>Full frame</th><th>Typing frame</th></tr>
<tr><td>decode PNG</td><td>18 ms</td><td>18 ms</td></tr>
<tr><td>tile and hash</td><td>6 ms</td><td>6 ms</td></tr>
<tr><td>encode tiles</td><td>610 ms</td><td>26 ms</td></tr>
<tr><td>encode thumbnail</td><td>24 ms</td><td>24 ms</td></tr>
<tr><td>prefill image tokens</td><td>240 ms</td><td>31 ms</td></tr>
</table>
<p>The numbers are illustrative, but the shape is typical: the encoder and the prefill dominate, and
both scale with the number of tiles that have to be processed again.</p>

<h2>7. Conclusions</h2>
<p>Exact tile reuse is simple, safe, and removes almost all of the work for the most common case, a
user typing or reading. It does little for scrolling and window switching, and nothing for a browser
that repaints the whole page. Those cases need either a cheaper encoder path, a lower frame rate
while the screen is busy, or tiles that follow the content.</p>
<p>The recorded sessions are part of the repository, so that every change to the cache can be
measured on the same frames. New sessions can be recorded with a single script; it starts a virtual
X server, drives real programs with synthetic key presses, and stores a screenshot after each action.</p>
<p>Future work includes recording longer sessions with a real window manager and panels, mixing
several kinds of activity in one session, and measuring reuse at the level of image tokens inside
the language model rather than at the level of pixels.</p>
</article>
<footer>tessera journal &middot; notes on building a screen-watching assistant</footer>
</body></html>
HTML
}

session_browse() {
  start_x; set_background   # no window manager: chromium draws its own frame
  write_article
  setsid chromium --no-sandbox --test-type --no-first-run --no-default-browser-check \
    --disable-gpu --disable-dev-shm-usage --password-store=basic --disable-smooth-scrolling \
    --disable-features=Translate,MediaRouter --disable-component-update \
    --disable-background-networking --disable-sync --hide-crash-restore-bubble \
    --user-data-dir="$WORK/chromium-profile" --window-position=0,0 --window-size=$W,$H \
    "file://$SITE/watching-the-screen.html" >"$WORK/chromium.log" 2>&1 &
  PGROUPS+=($!)
  timeout 90 xdotool search --sync --onlyvisible --name "Watching the screen" >/dev/null \
    || { echo "chromium window did not appear:" >&2; tail -n 20 "$WORK/chromium.log" >&2; exit 1; }
  sleep 4   # let it finish painting
  # focus the page: click on the empty margin beside the article, leave the pointer there
  xdotool mousemove 1750 700 click 1
  sleep 0.5
  begin_frames browse
  local actions=("key Page_Down" "click --repeat 3 --delay 120 5" "key Page_Down"
                 "click --repeat 5 --delay 120 5" "key Down Down Down Down" "key Page_Down")
  local a
  for a in "${actions[@]}"; do
    # shellcheck disable=SC2086
    xdotool $a
    snap 1.2
  done
  end_session
}

session_idle() {
  desktop
  start_xedit src/tile_cache.cpp 1000x760+40+40
  wait_window "--class Xedit" >/dev/null
  start_shell_xterm 100x34+1060+300 "user@tessera: ~/project" -bc   # focused, blinking cursor
  local xt; xt="$(wait_window "--class XTerm")"
  sleep 1.5
  # shellcheck disable=SC2034  # (set by getwindowgeometry --shell)
  local WINDOW X Y WIDTH HEIGHT SCREEN
  eval "$(xdotool getwindowgeometry --shell "$xt")"
  xdotool mousemove $((X + WIDTH - 40)) $((Y + HEIGHT - 40))   # twm: focus follows the pointer
  begin_frames idle
  local i
  for i in 1 2 3 4; do snap 1.0; done
  end_session
}

for s in $SESSIONS; do
  case "$s" in
    typing|typing_long|scroll|switch|browse|idle) ;;
    *) echo "unknown session '$s' (known: typing typing_long scroll switch browse idle)" >&2; exit 1 ;;
  esac
  echo "recording $s ..." >&2
  "session_$s"
  n=$(find "$OUT/$s" -name 'frame_*.png' | wc -l)
  sz=$(du -sh "$OUT/$s" | cut -f1)
  echo "  $s: $n frames, $sz" >&2
done
for f in "$OUT"/*/frame_000.png; do
  [ -e "$f" ] || continue
  d="$(identify -format '%wx%h %[channels] %z-bit' "$f")"
  [[ "$d" == "${W}x${H} srgb"* || "$d" == "${W}x${H} rgb"* ]] || echo "warning: $f is $d" >&2
done
du -sh "$OUT" >&2
