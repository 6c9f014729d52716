"""A Merkle tree over a drop's outcomes, as Certificate Transparency builds one (RFC 9162, 2.1).

Leaves are hashed as sha256(0x00 || leaf) and nodes as sha256(0x01 || left || right), so a node
can never pass for a leaf; a tree of n leaves splits at the largest power of two below n (no leaf
is duplicated to fill it, which would let two lists share a root). A proof is the sibling hashes
from the leaf up; anyone holding the leaf, its index, the tree's size and the proof recomputes the
root (static/js/report.js does the same in the buyer's browser, `manage.py verify_outcome` on the
command line).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def leaf_hash(leaf: str) -> bytes:
    return hashlib.sha256(b"\x00" + leaf.encode()).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


class Tree:
    """The tree's levels, the leaf hashes first: a level's odd last node moves up unchanged, which
    builds RFC 9162's tree (split at the largest power of two) level by level. Kept per published
    report, so a proof is a walk up the levels, not a rehashing of every leaf."""

    def __init__(self, hashes: Sequence[bytes]) -> None:
        level = list(hashes)
        self.levels = [level]
        while len(level) > 1:
            up = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                up.append(level[-1])
            self.levels.append(up)
            level = up

    @property
    def size(self) -> int:
        return len(self.levels[0])

    @property
    def root(self) -> bytes:
        """The tree's head; sha256 of nothing for an empty tree."""
        return self.levels[-1][0] if self.size else hashlib.sha256(b"").digest()

    def proof(self, index: int) -> list[bytes]:
        """The audit path of leaf `index`: the sibling hashes, the lowest first."""
        if not 0 <= index < self.size:
            raise IndexError(f"leaf {index} is not in a tree of {self.size}")
        path = []
        for level in self.levels[:-1]:
            if (index ^ 1) < len(level):  # no sibling: the node moved up unchanged
                path.append(level[index ^ 1])
            index >>= 1
        return path


def root(hashes: Sequence[bytes]) -> bytes:
    return Tree(hashes).root


def proof(hashes: Sequence[bytes], index: int) -> list[bytes]:
    return Tree(hashes).proof(index)


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
