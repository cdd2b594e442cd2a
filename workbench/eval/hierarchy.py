"""Credit that follows the heading tree: a retrieved chapter near a relevant one (its
child, parent or sibling) earns part of the credit, for ``hrecall@K`` and ``hndcg@K``.

A hierarchy maps a node id to its parent id (None at a root), as a mapping or a callable
such as ``lambda n: kb.get(n).parent_id``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

# Partial credit for hierarchical recall: a retrieved descendant of a relevant chapter counts
# 0.5, an ancestor 0.3 (docs/design.md, "Data contracts").
CREDIT_EXACT = 1.0
CREDIT_DESCENDANT = 0.5
CREDIT_ANCESTOR = 0.3
CREDIT_SIBLING = 0.2  # hndcg only: a sibling chapter is a near miss, not part of the answer

Hierarchy = Callable[[str], "str | None"] | Mapping[str, "str | None"]


def tree_gains(
    top: Sequence[str], relevant: Mapping[str, int], hierarchy: Hierarchy | None
) -> list[float]:
    """Gain of each ranked item for ``hndcg``: graded NDCG by parent/child/sibling.

    Walking the ranking top down, an item that is itself relevant gains its grade. Any
    other item gains ``credit x grade`` for the best relevant chapter it is near that is
    not yet credited and not itself in ``top``: credit 0.5 for a descendant of it, 0.3 for
    an ancestor, 0.2 for a sibling (same parent). Each relevant chapter is credited once
    and each item credits at most one, so DCG <= ideal DCG and ``hndcg@K`` lies in
    [ndcg@K, 1] for binary qrels.
    """
    parent_of = as_parent_fn(hierarchy)
    in_top = set(top)
    credited: set[str] = set()
    gains: list[float] = []
    for doc in top:
        if doc in relevant and doc not in credited:
            credited.add(doc)
            gains.append(float(relevant[doc]))
            continue
        best, best_rel = 0.0, None
        if parent_of is not None:
            doc_anc = ancestors(doc, parent_of)
            doc_parent = parent_of(doc)
            for rel, g in sorted(relevant.items()):
                if rel in credited or rel in in_top:
                    continue
                if rel in doc_anc:
                    c = CREDIT_DESCENDANT
                elif doc in ancestors(rel, parent_of):
                    c = CREDIT_ANCESTOR
                elif doc_parent is not None and doc_parent == parent_of(rel):
                    c = CREDIT_SIBLING
                else:
                    continue
                if c * g > best:
                    best, best_rel = c * g, rel
        if best_rel is not None:
            credited.add(best_rel)
        gains.append(best)
    return gains


def as_parent_fn(hierarchy: Hierarchy | None) -> Callable[[str], str | None] | None:
    if hierarchy is None or callable(hierarchy):
        return hierarchy
    return hierarchy.get


def ancestors(node: str, parent_of: Callable[[str], str | None]) -> list[str]:
    seen: list[str] = []
    cur = parent_of(node)
    while cur is not None and cur != node and cur not in seen:  # a cycle must not hang us
        seen.append(cur)
        cur = parent_of(cur)
    return seen


def hierarchical_credit(
    relevant_node: str, retrieved: Sequence[str], hierarchy: Hierarchy | None
) -> float:
    """Best credit any retrieved node earns for one relevant node.

    A retrieved node ``d`` earns, for the relevant node ``r``:
    1.0 if ``d == r``; 0.5 if ``d`` is a descendant of ``r`` (``r`` is on ``d``'s parent
    chain, at any depth: the answer is inside the chapter found); 0.3 if ``d`` is an
    ancestor of ``r`` (``d`` is on ``r``'s parent chain: the reader must still dig);
    otherwise 0. Siblings earn nothing. ``hrecall@K`` is the mean of this credit over
    the relevant nodes, with ``retrieved`` = the top K, so it lies in [recall@K, 1].
    ``hierarchy`` maps a node id to its parent id (None at a root), as a mapping or a
    callable such as ``lambda n: kb.get(n).parent_id``.
    """
    parent_of = as_parent_fn(hierarchy)
    if relevant_node in retrieved:
        return CREDIT_EXACT
    if parent_of is None:
        return 0.0
    best = 0.0
    rel_ancestors = set(ancestors(relevant_node, parent_of))
    for doc in retrieved:
        if relevant_node in ancestors(doc, parent_of):
            return CREDIT_DESCENDANT  # the highest partial credit; nothing can beat it now
        if doc in rel_ancestors:
            best = CREDIT_ANCESTOR
    return best
