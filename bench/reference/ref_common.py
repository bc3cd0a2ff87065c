"""Pieces the reference scripts in this folder share (imported by them; not a tool of its own)."""
from __future__ import annotations

import hashlib
from pathlib import Path


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map (what byte-level BPE vocabularies are written in)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def dump_gguf(path: Path, max_array: int = 16, hash_long_strings: bool = False) -> dict:
    """A GGUF file's keys (long arrays and strings abbreviated) and tensors (name, type, shape)."""
    from gguf import GGUFReader

    r = GGUFReader(str(path))
    keys = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        try:
            v = f.contents()
        except Exception as e:  # noqa: BLE001
            v = f"<unreadable: {e}>"
        if isinstance(v, list) and len(v) > max_array:
            v = {"array_len": len(v), "first": v[:4], "last": v[-4:]} if hash_long_strings else {"array_len": len(v), "first": v[:4]}
        elif isinstance(v, str) and len(v) > 300:
            v = {"chars": len(v), "sha256": hashlib.sha256(v.encode()).hexdigest(), "head": v[:120]} if hash_long_strings else v[:300] + "..."
        keys[k] = v
    tensors = [{"name": t.name, "type": t.tensor_type.name, "shape_ggml": [int(x) for x in t.shape]} for t in r.tensors]
    return {"keys": keys, "tensors": tensors}
