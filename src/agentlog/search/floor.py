"""How similar a semantic candidate must be, for this index: a floor that rises with the store.

The best cosine of a query nothing in the store is about rises with the number of vectors (more
vectors, more chances that one lies near by accident): a fixed floor that keeps an unrelated
query's hits out of a thousand vectors lets some through at a million. So each segment of the
index keeps, beside its vectors, the best score it gives each of :data:`BACKGROUND` — everyday
sentences a coding agent's history is not about, written for this purpose — and the index's
**background** is each sentence's best over every segment: what an unrelated query finds in this
store, at its size. The floor is the :data:`QUANTILE` of those best scores, and never below
:data:`agentlog.search.hybrid.FLOOR`. It costs one product of the new vectors with
``len(BACKGROUND)`` query vectors when a segment is written, and nothing at query time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np

BACKGROUND: Final = (
    "what time does the bakery open on sunday morning",
    "a recipe for lemon drizzle cake with fresh berries",
    "how many goals did the home team score last season",
    "the best hiking trails near the lake in autumn",
    "my grandmother's garden is full of tulips and roses",
    "cheap flights to lisbon in the spring holidays",
    "how to train a puppy to sit and stay",
    "the history of the roman empire and its emperors",
    "which wine goes well with grilled salmon",
    "the choir rehearses every thursday evening at the church",
    "tips for growing tomatoes on a sunny balcony",
    "the museum has a new exhibition of impressionist paintings",
    "how long should i boil an egg for a soft yolk",
    "the wedding reception will be held in a barn",
    "planting an apple orchard on a hillside farm",
    "the weather forecast says heavy snow over the mountains tomorrow",
    "a poem about the sea at dawn and the gulls",
    "the marathon route goes along the river and over two bridges",
    "how to knit a wool hat for the winter",
    "the cat sleeps on the windowsill all afternoon",
    "booking a table for six at the italian restaurant",
    "the orchestra played a symphony by brahms",
    "a bedtime story about a dragon who was afraid of the dark",
    "the best way to clean a cast iron frying pan",
    "she won the chess tournament in the final round",
    "the farmers market sells honey eggs and fresh bread",
    "learning to play the violin as an adult",
    "our holiday cottage has a thatched roof and a fireplace",
    "the tides are highest during the full moon",
    "a documentary about elephants crossing the savanna",
    "my neighbour's dog barks at the postman every day",
    "the ballet dancers rehearsed the swan lake solo",
)
"""Queries a coding agent's history is not about (none of them is a query of the relevance set)."""
QUANTILE: Final = 0.9
"""Of the background sentences' best scores, the one a candidate must reach: above nine in ten of
them, so one sentence that happens to match the store (a cooking app's history and the recipe)
does not raise the floor alone."""


def background(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Each background sentence's best cosine with ``vectors`` (int8 rows; -1 when there are none):
    ``queries`` are the sentences' unit vectors, one row each."""
    import numpy as np

    best = np.full(len(queries), -1.0, dtype=np.float32)
    for start in range(0, len(vectors), 65_536):
        block = vectors[start:start + 65_536].astype(np.float32) / 127.0
        best = np.maximum(best, (block @ queries.T).max(axis=0))
    return best


def floor(best: np.ndarray | None, minimum: float) -> float:
    """The floor of an index whose background scores are ``best`` (None: no vector), at least ``minimum``."""
    import numpy as np

    if best is None or not len(best) or float(np.max(best)) < -0.5:
        return minimum
    return max(minimum, float(np.quantile(best, QUANTILE)))


__all__ = ["BACKGROUND", "QUANTILE", "background", "floor"]
