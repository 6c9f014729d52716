"""A Merkle tree over a drop's outcomes, as Certificate Transparency builds one (RFC 9162, 2.1).

Leaves are hashed as sha256(0x00 || leaf) and nodes as sha256(0x01 || left || right), so a node
can never pass for a leaf; a tree of n leaves splits at the largest power of two below n (no
leaf is duplicated to fill it). A proof is the sibling hashes from the leaf up; anyone holding
the leaf, its index, the tree's size and the proof recomputes the root (static/js/report.js does
the same in the buyer's browser, `manage.py verify_outcome` on the command line).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def leaf_hash(leaf: str) -> bytes:
    return hashlib.sha256(b"\x00" + leaf.encode()).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def root(hashes: Sequence[bytes]) -> bytes:
    """The tree's head over these leaf hashes; sha256 of nothing for an empty tree."""
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    k = _split(len(hashes))
    return node_hash(root(hashes[:k]), root(hashes[k:]))


def proof(hashes: Sequence[bytes], index: int) -> list[bytes]:
    """The audit path of leaf `index`: the sibling hashes, the lowest first."""
    if not 0 <= index < len(hashes):
        raise IndexError(f"leaf {index} is not in a tree of {len(hashes)}")
    if len(hashes) == 1:
        return []
    k = _split(len(hashes))
    if index < k:
        return [*proof(hashes[:k], index), root(hashes[k:])]
    return [*proof(hashes[k:], index - k), root(hashes[:k])]


def root_from_proof(leaf: bytes, index: int, size: int, path: Sequence[bytes]) -> bytes | None:
    """The root that `path` leads to from leaf hash `leaf` at `index` of `size`; None when the path
    cannot belong to a tree of that size (too long or too short)."""
    if not 0 <= index < size:
        return None
    fn, sn, r = index, size - 1, leaf
    for sibling in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = node_hash(sibling, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, sibling)
        fn, sn = fn >> 1, sn >> 1
    return r if sn == 0 else None
